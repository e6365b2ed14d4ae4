import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { confFileOrder, loadNetworks, parseNetworkList, selectDefault, LOOPBACK_NETWORK } from '../../../cni/config.js';
import { defaultNetworkConfig, ensureDefaultNetwork } from '../../../cni/default-network.js';
import { InvalidArgument } from '../../../core/errors.js';
import { silentLogger } from '../../../core/log.js';

test('confFileOrder keeps conf extensions in byte order and drops the rest', () => {
  assert.deepEqual(confFileOrder(['99-b.conf', '10-a.conflist', 'README', 'x.json', '.hidden.conf', '10-a.conf.bak', 'B.conf']), [
    '10-a.conflist',
    '99-b.conf',
    'B.conf',
    'x.json',
  ]);
});

test('a single .conf becomes a one-plugin list with its name and version', () => {
  const l = parseNetworkList(Buffer.from('{"cniVersion":"0.4.0","name":"one","type":"bridge","capabilities":{"portMappings":true,"x":false}}'), '/d/a.conf');
  assert.equal(l.name, 'one');
  assert.equal(l.cniVersion, '0.4.0');
  assert.equal(l.plugins.length, 1);
  assert.equal(l.plugins[0]!.type, 'bridge');
  assert.deepEqual(l.plugins[0]!.capabilities, ['portMappings']);
  assert.deepEqual(JSON.parse(l.bytes.toString()), {
    cniVersion: '0.4.0',
    name: 'one',
    plugins: [{ cniVersion: '0.4.0', name: 'one', type: 'bridge', capabilities: { portMappings: true, x: false } }],
  });
});

test('a .conflist keeps its exact bytes and flags', () => {
  const text = '{"cniVersion":"1.0.0","name":"l","disableCheck":true,"plugins":[{"type":"bridge"},{"type":"portmap"}]}';
  const l = parseNetworkList(Buffer.from(text), '/d/a.conflist');
  assert.equal(l.bytes.toString(), text);
  assert.equal(l.disableCheck, true);
  assert.deepEqual(l.plugins.map((p) => p.type), ['bridge', 'portmap']);
});

test('cniVersions picks the highest supported version', () => {
  const l = parseNetworkList(Buffer.from('{"cniVersions":["0.3.1","1.1.0","9.0.0"],"name":"l","plugins":[{"type":"x"}]}'), 'a.conflist');
  assert.equal(l.cniVersion, '1.1.0');
});

test('invalid configs are rejected with a reason', () => {
  const bad: [string, string, RegExp][] = [
    ['{', 'a.conf', /not valid JSON/],
    ['[]', 'a.conf', /not a JSON object/],
    ['{"cniVersion":"1.0.0","type":"bridge"}', 'a.conf', /"name"/],
    ['{"cniVersion":"0.2.0","name":"n","type":"bridge"}', 'a.conf', /unsupported cniVersion/],
    ['{"cniVersion":"1.0.0","name":"n"}', 'a.conf', /"type"/],
    ['{"cniVersion":"1.0.0","name":"n","type":"../sh"}', 'a.conf', /"type"/],
    ['{"cniVersion":"1.0.0","name":"n","plugins":[]}', 'a.conflist', /no "plugins"/],
    ['{"cniVersion":"1.0.0","name":"n","plugins":[{}]}', 'a.conflist', /plugin #0/],
  ];
  for (const [text, file, re] of bad) {
    assert.throws(() => parseNetworkList(Buffer.from(text), file), (e: unknown) => e instanceof InvalidArgument && re.test((e as Error).message), text);
  }
});

test('selectDefault: by name when configured, else first', () => {
  const a = parseNetworkList(Buffer.from('{"cniVersion":"1.0.0","name":"a","type":"x"}'), 'a.conf');
  const b = parseNetworkList(Buffer.from('{"cniVersion":"1.0.0","name":"b","type":"x"}'), 'b.conf');
  assert.equal(selectDefault([a, b])?.name, 'a');
  assert.equal(selectDefault([a, b], 'b')?.name, 'b');
  assert.equal(selectDefault([a, b], 'c'), undefined);
  assert.equal(selectDefault([]), undefined);
});

test('loopback network is a single loopback plugin', () => {
  assert.equal(LOOPBACK_NETWORK.name, 'cni-loopback');
  assert.deepEqual(LOOPBACK_NETWORK.plugins.map((p) => p.type), ['loopback']);
});

test('loadNetworks skips invalid files and duplicate names, in sorted order', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'mcnt-unit-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(path.join(dir, '00-broken.conf'), '{nope');
  await writeFile(path.join(dir, '20-b.conflist'), '{"cniVersion":"1.0.0","name":"b","plugins":[{"type":"bridge"}]}');
  await writeFile(path.join(dir, '10-a.json'), '{"cniVersion":"0.3.1","name":"a","type":"ptp"}');
  await writeFile(path.join(dir, '30-dup.conf'), '{"cniVersion":"0.3.1","name":"a","type":"ptp"}');
  await writeFile(path.join(dir, 'notes.txt'), 'x');
  const lists = await loadNetworks(dir, silentLogger);
  assert.deepEqual(lists.map((l) => l.name), ['a', 'b']);
  assert.deepEqual(await loadNetworks(path.join(dir, 'missing'), silentLogger), []);
});

test('ensureDefaultNetwork writes a bridge list only when no network exists', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'mcnt-unit-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const conf = path.join(dir, 'net.d');
  const file = await ensureDefaultNetwork(conf, '10.233.9.0/24');
  assert.equal(file, path.join(conf, '10-minicri.conflist'));
  const lists = await loadNetworks(conf, silentLogger);
  assert.deepEqual(lists[0]!.plugins.map((p) => p.type), ['bridge', 'portmap']);
  assert.equal(await ensureDefaultNetwork(conf, '10.233.9.0/24'), null);
  assert.throws(() => defaultNetworkConfig('10.233.9.0'), InvalidArgument);
  const v6 = defaultNetworkConfig('fd00:233::/64') as { plugins: { ipam?: { routes: { dst: string }[] } }[] };
  assert.equal(v6.plugins[0]!.ipam!.routes[0]!.dst, '::/0');
});
