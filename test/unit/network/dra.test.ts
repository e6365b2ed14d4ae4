// DRA-backed secondary networks: which allocated device each attachment gets, what its plugin is told
// (from the CDI spec), the status written for a node agent, and kubelet's answer read into claims.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseDefinition } from '../../../cni/attachment-definitions.js';
import { assignDevices } from '../../../cni/devices.js';
import { assignDraDevices, deviceInfo, draAttachmentStatus, pluginDevice, type DraAssignment, type KnownCdiDevice } from '../../../cni/dra.js';
import { allocationsOf, type DraClaim } from '../../../cni/pod-resources.js';
import { parseCdiSpec } from '../../../cdi/spec.js';
import { InvalidArgument } from '../../../core/errors.js';

const dev = (driver: string, device: string, pool = 'node-a', cdi = [`vf.example.com/net=${device}`]) => ({ driver, pool, device, cdiDevices: cdi });
const claims: DraClaim[] = [
  { namespace: 'pods', name: 'pod-vfs-x7k2q', devices: [dev('sriov.example.com', 'vf-1'), dev('sriov.example.com', 'vf-2'), dev('gpu.example.com', 'gpu-0')] },
  { namespace: 'pods', name: 'fast', devices: [dev('sriov.example.com', 'vf-9', 'node-b')] },
  { namespace: 'pods', name: 'pending', devices: [] },
];
const refused = (fn: () => unknown, re: RegExp) => assert.throws(fn, (e: unknown) => e instanceof InvalidArgument && re.test(e.message), re.source);

test('DRA devices go to the pod\'s networks in order, each once; pool and claim narrow the choice', () => {
  const got = assignDraDevices([
    { name: 'pods/a', dra: { driver: 'sriov.example.com' } },
    { name: 'pods/plain' },
    { name: 'pods/b', dra: { driver: 'sriov.example.com', claim: 'fast' } },
    { name: 'pods/c', dra: { driver: 'sriov.example.com', pool: 'node-a' } },
  ], claims, 'pods/p');
  assert.deepEqual(got.map((a) => a && `${a.claim.name}:${a.device.device}`), ['pod-vfs-x7k2q:vf-1', undefined, 'fast:vf-9', 'pod-vfs-x7k2q:vf-2']);
});

test('DRA refusals name the claim and what to do', () => {
  const one = (dra: { driver: string; pool?: string; claim?: string }, n = 1) =>
    assignDraDevices(Array.from({ length: n }, (_, i) => ({ name: `pods/n${i}`, dra })), claims, 'pods/p');
  refused(() => one({ driver: 'sriov.example.com', claim: 'other' }), /does not hold claim "other" \(it holds "pod-vfs-x7k2q", "fast", "pending"\): kubelet reports a claim only when a container lists it in resources\.claims/);
  refused(() => one({ driver: 'sriov.example.com', claim: 'pending' }), /claim "pending" is not allocated yet/);
  refused(() => one({ driver: 'sriov.example.com', pool: 'node-a', claim: 'fast' }), /none of the pod's allocated devices matches \(sriov\.example\.com\/node-b\/vf-9 of claim "fast"\)/);
  refused(() => one({ driver: 'sriov.example.com' }, 4), /network pods\/n3 needs a device of DRA driver "sriov\.example\.com" for pod pods\/p, but the pod's 3 such device\(s\) are all taken/);
  refused(() => assignDraDevices([{ name: 'pods/n', dra: { driver: 'x' } }], [], 'pods/p'), /holds no ResourceClaim of the pod/);
});

const spec = parseCdiSpec('/var/run/cdi/vf.json', JSON.stringify({
  cdiVersion: '1.1.0', kind: 'vf.example.com/net',
  devices: [
    { name: 'vf-1', containerEdits: { netDevices: [{ hostInterfaceName: 'ens1f0v1', name: 'net1' }] } },
    { name: 'vf-2', annotations: { 'dra.minicri.io/pci-address': '0000:3B:02.2' }, containerEdits: {} },
    { name: 'vf-3', containerEdits: { env: ['VF_PCI=0000:3b:02.3', 'OTHER=x'] } },
    { name: 'vf-4', containerEdits: { env: ['A=1'] } },
    { name: 'vf-5', annotations: { 'dra.minicri.io/pci-address': 'slot 5' }, containerEdits: {} },
  ],
}));
const lookup = (name: string): KnownCdiDevice | undefined => {
  const device = spec.devices.find((d) => `${spec.kind}=${d.name}` === name);
  return device && { spec, device };
};
const assignment = (device: string, cdi?: string[]): DraAssignment => ({ claim: { namespace: 'pods', name: 'c' }, device: dev('sriov.example.com', device, 'node-a', cdi) });

test('the plugin gets the netdev of the CDI spec, else the annotated PCI address, else the one its environment holds', () => {
  const dirs = ['/etc/cdi', '/var/run/cdi'];
  assert.deepEqual(pluginDevice(assignment('vf-1'), lookup, dirs), { deviceId: 'ens1f0v1', cdiName: 'vf.example.com/net=vf-1' });
  assert.deepEqual(pluginDevice(assignment('vf-2'), lookup, dirs), { deviceId: '0000:3b:02.2', cdiName: 'vf.example.com/net=vf-2' });
  assert.deepEqual(pluginDevice(assignment('vf-3'), lookup, dirs), { deviceId: '0000:3b:02.3', cdiName: 'vf.example.com/net=vf-3' });
  // An unknown CDI name beside a known one: the known one answers.
  assert.equal(pluginDevice(assignment('vf-1', ['vf.example.com/net=gone', 'vf.example.com/net=vf-1']), lookup, dirs).deviceId, 'ens1f0v1');
  refused(() => pluginDevice(assignment('vf-0', []), lookup, dirs), /device sriov\.example\.com\/node-a\/vf-0 of claim pods\/c has no CDI device/);
  refused(() => pluginDevice(assignment('gone'), lookup, dirs), /of claim pods\/c has no CDI spec on this node: no spec file in \/etc\/cdi, \/var\/run\/cdi defines vf\.example\.com\/net=gone/);
  refused(() => pluginDevice(assignment('vf-4'), lookup, dirs), /names neither a network interface \(netDevices\) nor a PCI address/);
  refused(() => pluginDevice(assignment('vf-5'), lookup, dirs), /"slot 5", which is not a PCI address/);
});

test('device status: KEP-4817 AllocatedDeviceStatus with networkData, and multus\'s entry as its data', () => {
  const entry = { name: 'pods/vf', interface: 'net1', ips: ['10.9.0.5'], mac: '02:00:00:00:00:05', dns: {}, 'device-info': deviceInfo('0000:3b:02.2')! };
  const s = draAttachmentStatus('pods/vf', 'net1', assignment('vf-2'), { deviceId: '0000:3b:02.2', cdiName: 'vf.example.com/net=vf-2' },
    { cidrs: ['10.9.0.5/24'], mac: '02:00:00:00:00:05' }, entry);
  assert.deepEqual(s.status, {
    driver: 'sriov.example.com', pool: 'node-a', device: 'vf-2', data: entry,
    networkData: { interfaceName: 'net1', ips: ['10.9.0.5/24'], hardwareAddress: '02:00:00:00:00:05' },
  });
  assert.deepEqual(entry['device-info'], { type: 'pci', version: '1.0.0', pci: { 'pci-address': '0000:3b:02.2' } });
  assert.equal(deviceInfo('ens1f0v1'), undefined);
  const bare = draAttachmentStatus('pods/vf', 'net1', assignment('vf-1'), { deviceId: 'ens1f0v1', cdiName: 'x' }, { cidrs: [] }, {});
  assert.deepEqual(bare.status.networkData, { interfaceName: 'net1' });
});

test('kubelet\'s answer: a claim listed by two containers counts once, its devices once, in kubelet\'s order', () => {
  const cr = (device: string, cdi: string[]) => ({ driver_name: 'sriov.example.com', pool_name: 'p', device_name: device, cdi_devices: cdi.map((name) => ({ name })) });
  const got = allocationsOf({
    name: 'p', namespace: 'pods',
    containers: [
      { devices: [{ resource_name: 'r', device_ids: ['a'] }], dynamic_resources: [{ claim_name: 'c1', claim_namespace: 'pods', claim_resources: [cr('vf-1', ['x=1']), cr('vf-2', ['x=2'])] }] },
      { devices: [{ resource_name: 'r', device_ids: ['a', 'b'] }], dynamic_resources: [
        { claim_name: 'c1', claim_namespace: 'pods', claim_resources: [cr('vf-1', ['x=1', 'x=1b'])] },
        { claim_name: 'c2', claim_namespace: 'pods', claim_resources: [] },
      ] },
    ],
  });
  assert.deepEqual([...got.devices], [['r', ['a', 'b']]]);
  assert.deepEqual(got.claims, [
    { namespace: 'pods', name: 'c1', devices: [
      { driver: 'sriov.example.com', pool: 'p', device: 'vf-1', cdiDevices: ['x=1', 'x=1b'] },
      { driver: 'sriov.example.com', pool: 'p', device: 'vf-2', cdiDevices: ['x=2'] },
    ] },
    { namespace: 'pods', name: 'c2', devices: [] },
  ]);
  assert.deepEqual(allocationsOf(undefined), { devices: new Map(), claims: [] });
});

test('a definition names its DRA device by driver, pool and claim annotations; refused beside a resourceName', () => {
  const def = (annotations: Record<string, string>) => parseDefinition({
    apiVersion: 'k8s.cni.cncf.io/v1', kind: 'NetworkAttachmentDefinition', metadata: { name: 'vf', namespace: 'pods', annotations },
    spec: { config: '{"cniVersion":"1.0.0","name":"vf","type":"host-device"}' },
  }, 'vf.yaml');
  assert.deepEqual(def({ 'dra.minicri.io/driver': 'sriov.example.com', 'dra.minicri.io/pool': 'node-a', 'dra.minicri.io/claim': 'fast' }).dra,
    { driver: 'sriov.example.com', pool: 'node-a', claim: 'fast' });
  assert.deepEqual(def({ 'dra.minicri.io/driver': ' sriov.example.com ' }).dra, { driver: 'sriov.example.com' });
  assert.equal(def({}).dra, undefined);
  refused(() => def({ 'dra.minicri.io/driver': 'd', 'k8s.v1.cni.cncf.io/resourceName': 'example.com/vf' }), /both name the network's device: keep one/);
  refused(() => def({ 'dra.minicri.io/claim': 'fast' }), /dra\.minicri\.io\/claim needs dra\.minicri\.io\/driver/);
  refused(() => def({ 'dra.minicri.io/driver': 'd', 'dra.minicri.io/claim': 'Not_A_Name' }), /"Not_A_Name" is not a valid ResourceClaim name/);
});

test('a resourceName kubelet allocated nothing of, on a pod with DRA claims, hints at multus\'s <claim>/<request> form', () => {
  refused(() => assignDevices([{ name: 'pods/vf', resourceName: 'sriov/vf' }], new Map(), true), /kubelet allocated none to the pod: request sriov\/vf in a container's resources; if it names a DRA claim and request \(as multus reads it\), name the device by the dra\.minicri\.io\/driver annotation instead$/);
  refused(() => assignDevices([{ name: 'pods/vf', resourceName: 'example.com/vf' }], new Map(), false), /request example\.com\/vf in a container's resources$/);
});
