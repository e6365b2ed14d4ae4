import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadDefinitions, parseDefinitionFile } from '../../../cni/attachment-definitions.js';
import { InvalidArgument } from '../../../core/errors.js';
import type { Logger } from '../../../core/log.js';

const macvlan = JSON.stringify({ cniVersion: '0.3.1', name: 'macvlan-conf', type: 'macvlan', master: 'eth1', ipam: { type: 'host-local', subnet: '10.10.0.0/24' } });

test('a kubectl List of definitions with multi-line config, resourceName and extra metadata', () => {
  const text = `apiVersion: v1
items:
- apiVersion: k8s.cni.cncf.io/v1
  kind: NetworkAttachmentDefinition
  metadata:
    annotations:
      k8s.v1.cni.cncf.io/resourceName: intel.com/sriov_vf
    creationTimestamp: "2024-01-01T00:00:00Z"
    name: sriov-net
    namespace: team-a
    resourceVersion: "123"
    uid: 6f1c
  spec:
    config: '{"cniVersion":"1.0.0","name":"sriov-net","type":"sriov","ipam":{}}'
- apiVersion: k8s.cni.cncf.io/v1
  kind: NetworkAttachmentDefinition
  metadata:
    name: macvlan-conf
    namespace: default
  spec:
    config: |
      ${macvlan}
kind: List
metadata:
  resourceVersion: ""
`;
  const defs = parseDefinitionFile(text, 'nets.yaml');
  assert.equal(defs.length, 2);
  assert.equal(defs[0]!.namespace, 'team-a');
  assert.equal(defs[0]!.name, 'sriov-net');
  assert.equal(defs[0]!.resourceName, 'intel.com/sriov_vf');
  assert.equal(defs[0]!.list!.plugins[0]!.type, 'sriov');
  assert.equal(defs[1]!.resourceName, undefined);
  assert.equal(defs[1]!.list!.plugins[0]!.type, 'macvlan');
});

test('several YAML documents, JSON files, a missing namespace (default) and an empty config', () => {
  const text = `---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: a}
spec:
  config: '{"cniVersion":"1.0.0","name":"a","plugins":[{"type":"bridge"}]}'
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: from-conf-dir, namespace: ns1}
---
`;
  const defs = parseDefinitionFile(text, 'f.yaml');
  assert.deepEqual(defs.map((d) => [d.namespace, d.name, d.list?.name]), [['default', 'a', 'a'], ['ns1', 'from-conf-dir', undefined]]);
  const json = JSON.stringify({ apiVersion: 'k8s.cni.cncf.io/v1', kind: 'NetworkAttachmentDefinition', metadata: { name: 'j', namespace: 'x' }, spec: { config: '' } });
  assert.equal(parseDefinitionFile(json, 'f.json')[0]!.list, undefined);
});

test('invalid definitions are refused, naming the problem', () => {
  const bad = (metadata: unknown, spec: unknown = {}, extra: Record<string, unknown> = {}) =>
    JSON.stringify({ apiVersion: 'k8s.cni.cncf.io/v1', kind: 'NetworkAttachmentDefinition', metadata, spec, ...extra });
  const cases: [string, RegExp][] = [
    [bad({ name: 'Bad_Name' }), /metadata\.name: must be a DNS-1123 subdomain/],
    [bad({ name: 'a', namespace: 'x.y' }), /metadata\.namespace: must be a DNS-1123 label/],
    [bad({ name: 'a' }, { config: '{not json' }), /NetworkAttachmentDefinition default\/a .* is not valid JSON/],
    [bad({ name: 'a' }, { config: '{"cniVersion":"1.0.0","name":"a"}' }), /invalid or missing "type"/],
    [bad({ name: 'a' }, {}, { kind: 'ConfigMap' }), /kind/],
    ['a: [unclosed', /not valid YAML/],
  ];
  for (const [text, re] of cases) {
    assert.throws(() => parseDefinitionFile(text, 'f.yaml'), (err: unknown) => err instanceof InvalidArgument && re.test(err.message), text);
  }
});

test('loadDefinitions reads yaml, yml and json files, skips invalid ones with a log line naming the file', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'mcnt-nad-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const def = (name: string) => `apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata: {name: ${name}, namespace: n}\n`;
  await writeFile(path.join(dir, '10-a.yaml'), def('a'));
  await writeFile(path.join(dir, '20-b.yml'), def('b'));
  await writeFile(path.join(dir, '30-dup.yaml'), def('a'));
  await writeFile(path.join(dir, '40-bad.json'), '{');
  await writeFile(path.join(dir, 'README.txt'), 'ignored');
  const warnings: { obj: Record<string, unknown>; msg: string }[] = [];
  const log = { warn: (obj: Record<string, unknown>, msg: string) => warnings.push({ obj, msg }) } as unknown as Logger;
  const defs = await loadDefinitions(dir, log);
  assert.deepEqual([...defs.keys()], ['n/a', 'n/b']);
  assert.equal(defs.get('n/a')!.source, path.join(dir, '10-a.yaml') + ' (object 1)');
  assert.deepEqual(warnings.map((w) => [path.basename(String(w.obj.file)), w.msg]), [
    ['30-dup.yaml', 'skipping network attachment definition: an earlier file defines the same one'],
    ['40-bad.json', 'skipping invalid network attachment definition file'],
  ]);
  assert.match(String(warnings[1]!.obj.reason), /not valid YAML/);
  assert.equal((await loadDefinitions(path.join(dir, 'missing'), log)).size, 0);
});
