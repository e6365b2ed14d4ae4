import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bandwidthFromAnnotations, capabilityArgs, cniArgs, cniArgsString, parseQuantity, pluginStdin, runtimeConfigFor } from '../../../cni/args.js';
import { parseNetworkList } from '../../../cni/config.js';
import { InvalidArgument } from '../../../core/errors.js';

const pod = { sandboxId: 'abc123', name: 'web', namespace: 'default', uid: 'u-1' };

test('CNI_ARGS carries the pod identity', () => {
  assert.equal(
    cniArgsString(cniArgs(pod)),
    'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=abc123;K8S_POD_UID=u-1',
  );
});

test('capability args: host ports only, bandwidth, ipRanges per CIDR, cgroupPath, annotations', () => {
  const annotations = { 'kubernetes.io/ingress-bandwidth': '10M', a: 'b' };
  const caps = capabilityArgs({
    portMappings: [
      { protocol: 'tcp', containerPort: 80, hostPort: 8080, hostIp: '' },
      { protocol: 'udp', containerPort: 53, hostPort: 5353, hostIp: '127.0.0.1' },
      { protocol: 'tcp', containerPort: 9000, hostPort: 0, hostIp: '' },
    ],
    annotations,
    cgroupParent: '/kubepods/pod1',
    podCidr: '10.233.0.0/16, fd00::/64',
  });
  assert.deepEqual(caps, {
    portMappings: [
      { hostPort: 8080, containerPort: 80, protocol: 'tcp' },
      { hostPort: 5353, containerPort: 53, protocol: 'udp', hostIP: '127.0.0.1' },
    ],
    bandwidth: { ingressRate: 10_000_000, ingressBurst: 4294967295 },
    ipRanges: [[{ subnet: '10.233.0.0/16' }], [{ subnet: 'fd00::/64' }]],
    cgroupPath: '/kubepods/pod1',
    'io.kubernetes.cri.pod-annotations': annotations,
  });
  assert.deepEqual(capabilityArgs({ portMappings: [], annotations: {} }), { 'io.kubernetes.cri.pod-annotations': {} });
});

test('runtimeConfig holds only what the plugin declares', () => {
  const list = parseNetworkList(
    Buffer.from('{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge"},{"type":"portmap","capabilities":{"portMappings":true,"bandwidth":true}}]}'),
    'a.conflist',
  );
  const caps = { portMappings: [{ hostPort: 1, containerPort: 2, protocol: 'tcp' }], cgroupPath: '/x' };
  assert.equal(runtimeConfigFor(list.plugins[0]!, caps), undefined);
  assert.deepEqual(runtimeConfigFor(list.plugins[1]!, caps), { portMappings: caps.portMappings });
  const stdin = JSON.parse(pluginStdin(list, list.plugins[1]!, { prevResult: { cniVersion: '1.0.0', ips: [] }, capabilityArgs: caps }).toString());
  assert.deepEqual(stdin, {
    type: 'portmap',
    capabilities: { portMappings: true, bandwidth: true },
    name: 'n',
    cniVersion: '1.0.0',
    prevResult: { cniVersion: '1.0.0', ips: [] },
    runtimeConfig: { portMappings: caps.portMappings },
  });
  const bare = JSON.parse(pluginStdin(list, list.plugins[0]!, { extra: { 'cni.dev/valid-attachments': [] } }).toString());
  assert.deepEqual(bare, { type: 'bridge', name: 'n', cniVersion: '1.0.0', 'cni.dev/valid-attachments': [] });
});

test('parseQuantity: suffixes, fractions, exponents, rounding up', () => {
  const cases: [string, bigint][] = [
    ['1', 1n],
    ['10M', 10_000_000n],
    ['1k', 1000n],
    ['1Ki', 1024n],
    ['1.5Mi', 1_572_864n],
    ['100m', 1n],
    ['1500m', 2n],
    ['2e3', 2000n],
    ['2E3', 2000n],
    ['1E', 10n ** 18n],
    ['1P', 10n ** 15n],
    ['.5k', 500n],
    ['+3G', 3_000_000_000n],
    ['-1k', -1000n],
    ['1u', 1n],
    ['5n', 1n],
  ];
  for (const [s, v] of cases) assert.equal(parseQuantity(s), v, s);
  for (const s of ['', 'M', '1 M', '1KB', '1.2.3', 'abc', '1e']) assert.throws(() => parseQuantity(s), InvalidArgument, s);
});

test('bandwidth annotations are bounded like kubelet does', () => {
  assert.equal(bandwidthFromAnnotations({}), undefined);
  assert.deepEqual(bandwidthFromAnnotations({ 'kubernetes.io/egress-bandwidth': '1Mi' }), { egressRate: 1_048_576, egressBurst: 4294967295 });
  assert.throws(() => bandwidthFromAnnotations({ 'kubernetes.io/ingress-bandwidth': '999' }), /unreasonably small/);
  assert.throws(() => bandwidthFromAnnotations({ 'kubernetes.io/ingress-bandwidth': '2P' }), /unreasonably large/);
  assert.throws(() => bandwidthFromAnnotations({ 'kubernetes.io/egress-bandwidth': 'fast' }), InvalidArgument);
});
