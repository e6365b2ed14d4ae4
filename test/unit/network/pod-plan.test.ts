import { test } from 'node:test';
import assert from 'node:assert/strict';
import { attachmentCapabilityArgs, withArgsCni } from '../../../cni/args.js';
import { parseDefinition, type AttachmentDefinition } from '../../../cni/attachment-definitions.js';
import { parseNetworkList } from '../../../cni/config.js';
import { assignDevices, withDeviceId } from '../../../cni/devices.js';
import { planPodNetworks, type KnownNetworks } from '../../../cni/pod-plan.js';
import { InvalidArgument } from '../../../core/errors.js';

const list = (name: string, plugins: Record<string, unknown>[] = [{ type: 'bridge' }]) =>
  parseNetworkList(Buffer.from(JSON.stringify({ cniVersion: '1.0.0', name, plugins })), `${name}.conflist`);

function def(namespace: string, name: string, config?: unknown, resourceName?: string): [string, AttachmentDefinition] {
  const d = parseDefinition({
    apiVersion: 'k8s.cni.cncf.io/v1', kind: 'NetworkAttachmentDefinition',
    metadata: { name, namespace, ...(resourceName ? { annotations: { 'k8s.v1.cni.cncf.io/resourceName': resourceName } } : {}) },
    spec: { config: config === undefined ? '' : JSON.stringify(config) },
  }, 'test');
  return [`${namespace}/${name}`, d];
}

const catalog: KnownNetworks = {
  defaultNet: list('cluster'),
  confLists: [list('cluster'), list('from-conf')],
  definitions: new Map([
    def('pods', 'a', { cniVersion: '1.0.0', name: 'net-a', type: 'macvlan' }),
    def('other', 'b', { cniVersion: '1.0.0', name: 'net-b', plugins: [{ type: 'ipvlan' }] }),
    def('pods', 'from-conf'),
    def('pods', 'orphan'),
    def('pods', 'vf', { cniVersion: '1.0.0', name: 'vf', type: 'sriov' }, 'example.com/vf'),
  ]),
  networksDir: '/nets', confDir: '/conf',
};

test('a pod without annotations joins the default network only', () => {
  assert.deepEqual(planPodNetworks({}, 'pods', catalog), { main: catalog.defaultNet, mainName: 'cluster', secondaries: [] });
});

test('secondary networks resolve in order, with interfaces, the conf dir for an empty config, resourceName', () => {
  const plan = planPodNetworks({ 'k8s.v1.cni.cncf.io/networks': 'a, other/b@fast0, from-conf, vf' }, 'pods', catalog);
  assert.deepEqual(plan.secondaries.map((s) => [s.key, s.ifName, s.list.name, s.resourceName]), [
    ['pods/a', 'net1', 'net-a', undefined],
    ['other/b', 'fast0', 'net-b', undefined],
    ['pods/from-conf', 'net3', 'from-conf', undefined],
    ['pods/vf', 'net4', 'vf', 'example.com/vf'],
  ]);
});

test('the default-network annotation puts a definition on eth0', () => {
  const plan = planPodNetworks({ 'v1.multus-cni.io/default-network': 'other/b' }, 'pods', catalog);
  assert.equal(plan.main.name, 'net-b');
  assert.equal(plan.mainName, 'other/b');
});

test('unknown networks and definitions without a network are InvalidArgument naming them', () => {
  const plan = (annotations: Record<string, string>) => () => planPodNetworks(annotations, 'pods', catalog);
  const missing = /network pods\/missing is not defined: no NetworkAttachmentDefinition pods\/missing in \/nets/;
  assert.throws(plan({ 'k8s.v1.cni.cncf.io/networks': 'a, missing' }), (e: unknown) =>
    e instanceof InvalidArgument && missing.test(e.message));
  assert.throws(plan({ 'k8s.v1.cni.cncf.io/networks': 'orphan' }), /has no spec\.config and \/conf has no CNI network named "orphan"/);
  assert.throws(plan({ 'v1.multus-cni.io/default-network': 'nope' }),
    /v1\.multus-cni\.io\/default-network: network pods\/nope is not defined/);
});

test('devices: one each in order, never twice; none left names the resource', () => {
  const devices = new Map([['example.com/vf', ['0000:03:02.1', '0000:03:02.2']]]);
  const needs = [{ name: 'p/vf', resourceName: 'example.com/vf' }, { name: 'p/a' }, { name: 'p/vf', resourceName: 'example.com/vf' }];
  assert.deepEqual(assignDevices(needs, devices), ['0000:03:02.1', undefined, '0000:03:02.2']);
  assert.throws(() => assignDevices([...needs, needs[0]!], devices),
    /network p\/vf needs a device of resource "example\.com\/vf", but the pod's 2 \(0000:03:02\.1, 0000:03:02\.2\) are all taken/);
  assert.throws(() => assignDevices(needs, new Map()), /kubelet allocated none to the pod/);
});

test('the device goes to runtimeConfig for a plugin declaring deviceID, into the config otherwise', () => {
  const l = list('dev', [{ type: 'sriov' }, { type: 'host-device' }, { type: 'tuning', capabilities: { deviceID: true } }]);
  const pci = withDeviceId(l, '0000:03:02.1');
  assert.deepEqual(pci.plugins.map((p) => p.raw), [
    { type: 'sriov', deviceID: '0000:03:02.1' },
    { type: 'host-device', deviceID: '0000:03:02.1', pciBusID: '0000:03:02.1' },
    { type: 'tuning', capabilities: { deviceID: true } },
  ]);
  assert.equal(withDeviceId(l, 'dummy7').plugins[1]!.raw.device, 'dummy7');
  // host-device refuses two ways of naming its device: the allocated one replaces the definition's.
  const named = list('hd', [{ type: 'host-device', device: 'eth9', hwaddr: '02:00:00:00:00:09' }]);
  const replaced = withDeviceId(named, '0000:03:02.1').plugins[0]!.raw;
  assert.deepEqual(replaced, { type: 'host-device', deviceID: '0000:03:02.1', pciBusID: '0000:03:02.1' });
  assert.deepEqual(JSON.parse(pci.bytes.toString()).plugins[0], { type: 'sriov', deviceID: '0000:03:02.1' });
  const caps = attachmentCapabilityArgs(
    { portMappings: [{ hostPort: 1 }], bandwidth: {}, ipRanges: [], cgroupPath: '/x', 'io.kubernetes.cri.pod-annotations': {} },
    { ips: ['10.0.0.5/24'], mac: '02:00:00:00:00:01' }, '0000:03:02.1',
  );
  assert.deepEqual(caps, {
    cgroupPath: '/x', 'io.kubernetes.cri.pod-annotations': {}, ips: ['10.0.0.5/24'], mac: '02:00:00:00:00:01', deviceID: '0000:03:02.1',
  });
});

test('one default route per address family across the pod\'s networks, refused before anything is made', () => {
  const ask = (value: unknown) => planPodNetworks({ 'k8s.v1.cni.cncf.io/networks': JSON.stringify(value) }, 'pods', catalog);
  const a = { name: 'a', 'default-route': ['10.1.0.1'] };
  assert.equal(ask([a, { name: 'b', namespace: 'other', 'default-route': ['fd00::1'] }]).secondaries.length, 2);
  const twoRoutes = /two IPv4 default routes requested \(10\.1\.0\.1 and 10\.2\.0\.1 on network other\/b\)/;
  assert.throws(() => ask([a, { name: 'b', namespace: 'other', 'default-route': ['10.2.0.1'] }]), (err: unknown) =>
    err instanceof InvalidArgument && twoRoutes.test(err.message));
  assert.throws(() => ask([{ name: 'a', 'default-route': ['fd00::1', 'fd00::2'] }]), /two IPv6 default routes/);
});

test('cni-args also reach every plugin as args.cni, over what the definition has there', () => {
  const chain = list('chain', [{ type: 'macvlan', args: { cni: { keep: 'yes', vlan: '1' }, other: 1 } }, { type: 'tuning' }]);
  const out = withArgsCni(chain, { vlan: '12' });
  assert.deepEqual(out.plugins.map((p) => p.raw.args), [{ cni: { keep: 'yes', vlan: '12' }, other: 1 }, { cni: { vlan: '12' } }]);
  assert.equal(out.name, 'chain');
  assert.equal(withArgsCni(chain, undefined), chain);
  assert.equal(withArgsCni(chain, {}), chain);
});
