// CDI spec files, device names, the edits requested devices bring and their application to an OCI spec.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InvalidArgument } from '../../../core/errors.js';
import { silentLogger } from '../../../core/log.js';
import { editsFor, indexDevices } from '../../../cdi/edits.js';
import { CdiRegistry, deviceNumbers, type NodeStat } from '../../../cdi/registry.js';
import { parseCdiSpec, parseQualifiedName, requestedCdiDevices } from '../../../cdi/spec.js';
import { withCdiEdits } from '../../../oci/runtime/spec/cdi.js';
import { applyOpts, baseSpec } from '../../../oci/runtime/spec/opts.js';

const GPU_JSON = JSON.stringify({
  cdiVersion: '0.7.0', kind: 'vendor.com/gpu',
  devices: [
    { name: 'gpu0', containerEdits: { env: ['GPU0=on'], deviceNodes: [{ path: '/dev/gpu0', type: 'c', major: 195, minor: 0 }] } },
    { name: 'gpu1', containerEdits: { env: ['GPU1=on'], deviceNodes: [{ path: '/dev/gpu1', type: 'c', major: 195, minor: 1, permissions: 'rw' }] } },
  ],
  containerEdits: { env: ['GPU_DRIVER=9'], mounts: [{ hostPath: '/opt/gpu/lib', containerPath: '/usr/lib/gpu', options: ['ro', 'bind'] }], additionalGids: [44, 0] },
});

const GPU_YAML = `
cdiVersion: "0.6.0"
kind: vendor.com/gpu
devices:
  - name: all
    containerEdits:
      hooks:
        - hookName: createContainer
          path: /usr/bin/gpu-hook
          args: [gpu-hook, setup]
`;

test('spec files are read as JSON or YAML, with their version and names checked', () => {
  const json = parseCdiSpec('/etc/cdi/gpu.json', GPU_JSON);
  assert.equal(json.kind, 'vendor.com/gpu');
  assert.deepEqual(json.devices.map((d) => d.name), ['gpu0', 'gpu1']);
  assert.deepEqual(json.containerEdits?.additionalGids, [44, 0]);
  const yaml = parseCdiSpec('/etc/cdi/gpu.yaml', GPU_YAML);
  assert.deepEqual(yaml.devices[0]!.containerEdits.hooks, [{ hookName: 'createContainer', path: '/usr/bin/gpu-hook', args: ['gpu-hook', 'setup'] }]);
  const refuses = (text: string, message: RegExp) =>
    assert.throws(() => parseCdiSpec('/etc/cdi/x.yaml', text), (e: Error) => e instanceof InvalidArgument && message.test(e.message) && e.message.includes('/etc/cdi/x.yaml'));
  refuses('cdiVersion: "0.2.0"\nkind: a.com/b\ndevices: [{name: x}]', /cdiVersion "0.2.0" is not one this runtime reads/);
  refuses('cdiVersion: "0.9.0"\nkind: a.com/b\ndevices: [{name: x}]', /cdiVersion "0.9.0"/);
  refuses('cdiVersion: "0.5.0"\nkind: vendor/class/x\ndevices: [{name: x}]', /kind "vendor\/class\/x" is not vendor.com\/class/);
  refuses('cdiVersion: "0.5.0"\nkind: a.com/b\ndevices: []', /at least one device/);
  refuses('cdiVersion: "0.5.0"\nkind: a.com/b\ndevices: [{name: -x}]', /device name "-x" is not valid/);
  refuses('cdiVersion: "0.5.0"\nkind: a.com/b\ndevices: [{name: x}, {name: x}]', /"x" is listed twice/);
  refuses('cdiVersion: "0.6.0"\nkind: a.com/b\ndevices: [{name: x, containerEdits: {additionalGids: [5]}}]', /additionalGids needs cdiVersion 0.7.0/);
  refuses('cdiVersion: "0.4.0"\nkind: a.com/b\ndevices: [{name: x, containerEdits: {deviceNodes: [{path: /dev/x, hostPath: /dev/y}]}}]', /hostPath needs cdiVersion 0.5.0/);
  refuses('cdiVersion: "0.3.0"\nkind: a.com/b\ndevices: [{name: 0x}]', /starting with a digit\) needs cdiVersion 0.5.0/);
  refuses('cdiVersion: "0.5.0"\nkind: a.com/b\ndevices: [{name: x, containerEdits: {env: [NOVALUE]}}]', /env.0 must be NAME=value/);
  refuses('cdiVersion: "0.5.0"\nkind: a.com/b\ndevices: [{name: x, containerEdits: {hooks: [{hookName: sometime, path: /x}]}}]', /hookName/);
  refuses('cdiVersion: "0.5.0"\nkind: a.com/b\ndevices: [{name: x, containerEdits: {deviceNodes: [{path: dev/x}]}}]', /"dev\/x" must be absolute/);
  refuses('{{{', /cannot be parsed/);
  assert.doesNotThrow(() => parseCdiSpec('/x.yaml', 'cdiVersion: "1.0.0"\nkind: a.com/b\ndevices: [{name: x}]'));
  refuses('cdiVersion: "1.2.0"\nkind: a.com/b\ndevices: [{name: x}]', /cdiVersion "1.2.0" is not one this runtime reads/);
  refuses('cdiVersion: "1.0.0"\nkind: a.com/b\ndevices: [{name: x, containerEdits: {netDevices: [{hostInterfaceName: eth5, name: net1}]}}]', /netDevices needs cdiVersion 1.1.0/);
  refuses('cdiVersion: "1.0.0"\nkind: a.com/b\ndevices: [{name: x, containerEdits: {intelRdt: {schemata: ["L3:0=f"]}}}]', /schemata and enableMonitoring needs cdiVersion 1.1.0/);
  refuses('cdiVersion: "1.1.0"\nkind: a.com/b\ndevices: [{name: x, containerEdits: {netDevices: [{hostInterfaceName: "a/b", name: net1}]}}]', /hostInterfaceName "a\/b" is not a valid interface name/);
  refuses('cdiVersion: "1.1.0"\nkind: a.com/b\ndevices: [{name: x, containerEdits: {netDevices: [{hostInterfaceName: a, name: n}, {hostInterfaceName: b, name: n}]}}]', /two net devices are named "n"/);
});

test('CDI 1.1: network devices of a device, and Intel RDT schemata', () => {
  const spec = parseCdiSpec('/var/run/cdi/net.json', JSON.stringify({
    cdiVersion: '1.1.0', kind: 'net.example.com/vf',
    devices: [{ name: 'vf-0', annotations: { 'dra.minicri.io/pci-address': '0000:3b:02.1' }, containerEdits: { netDevices: [{ hostInterfaceName: 'ens1f0v1', name: 'net1' }], intelRdt: { schemata: ['L3:0=ff'], enableMonitoring: true } } }],
  }));
  assert.deepEqual(spec.devices[0]!.containerEdits.netDevices, [{ hostInterfaceName: 'ens1f0v1', name: 'net1' }]);
  assert.deepEqual(spec.devices[0]!.containerEdits.intelRdt, { schemata: ['L3:0=ff'], enableMonitoring: true });
});

test('qualified names: vendor.com/class=name, from the CDI field and the cdi.k8s.io annotations', () => {
  assert.deepEqual(parseQualifiedName('vendor.com/gpu=gpu0'), { vendor: 'vendor.com', class: 'gpu', device: 'gpu0' });
  assert.deepEqual(parseQualifiedName('a.b/c=0:1'), { vendor: 'a.b', class: 'c', device: '0:1' });
  for (const bad of ['gpu0', 'vendor.com/gpu', 'gpu=gpu0', '/gpu=x', 'vendor.com/gpu=', 'vendor.com/gpu=-x']) {
    assert.throws(() => parseQualifiedName(bad), (e: Error) => e instanceof InvalidArgument && e.message.includes(`"${bad}"`));
  }
  assert.deepEqual(
    requestedCdiDevices([{ name: 'v.com/a=1' }], { 'cdi.k8s.io/b': 'v.com/a=2, v.com/a=1', 'cdi.k8s.io/a': 'v.com/a=3', other: 'x' }),
    ['v.com/a=1', 'v.com/a=3', 'v.com/a=2'],
  );
  assert.throws(() => requestedCdiDevices([{ name: 'gpu0' }], {}), /"gpu0" is not a fully qualified name/);
  assert.throws(() => requestedCdiDevices([], { 'cdi.k8s.io/x': 'a.com/b=c,' }), /empty CDI device name/);
});

test('requested devices bring their spec edits once, then their own, and unknown or conflicting ones are refused', () => {
  const gpu = parseCdiSpec('/etc/cdi/gpu.json', GPU_JSON);
  const index = indexDevices([{ file: '/etc/cdi/gpu.json', priority: 0, spec: gpu }]);
  const list = editsFor(['vendor.com/gpu=gpu1', 'vendor.com/gpu=gpu0'], index, ['/etc/cdi']);
  assert.deepEqual(list.map((e) => e.owner), ['CDI spec /etc/cdi/gpu.json', 'CDI device "vendor.com/gpu=gpu1"', 'CDI device "vendor.com/gpu=gpu0"']);
  assert.throws(() => editsFor(['vendor.com/gpu=gpu9'], index, ['/etc/cdi', '/var/run/cdi']),
    /CDI device "vendor.com\/gpu=gpu9" is unknown: no spec file in \/etc\/cdi, \/var\/run\/cdi defines it/);
  // A later directory overrides; two files of one directory conflict.
  const other = parseCdiSpec('/run/cdi/gpu.json', GPU_JSON.replace('"GPU0=on"', '"GPU0=zero"'));
  const overridden = indexDevices([{ file: '/etc/cdi/gpu.json', priority: 0, spec: gpu }, { file: '/run/cdi/gpu.json', priority: 1, spec: other }]);
  assert.equal(overridden.devices.get('vendor.com/gpu=gpu0')!.file, '/run/cdi/gpu.json');
  assert.equal(overridden.conflicts.size, 0);
  const clash = indexDevices([{ file: '/etc/cdi/a.json', priority: 0, spec: gpu }, { file: '/etc/cdi/b.json', priority: 0, spec: other }]);
  assert.throws(() => editsFor(['vendor.com/gpu=gpu0'], clash, ['/etc/cdi']), /defined in more than one spec file \(\/etc\/cdi\/a.json, \/etc\/cdi\/b.json\)/);
  // Two devices that set one variable differently.
  const env = parseCdiSpec('/etc/cdi/env.yaml', 'cdiVersion: "0.5.0"\nkind: other.org/env\ndevices:\n  - {name: a, containerEdits: {env: [GPU0=off]}}\n  - {name: b, containerEdits: {env: [GPU0=on]}}');
  const both = indexDevices([{ file: '/etc/cdi/gpu.json', priority: 0, spec: gpu }, { file: '/etc/cdi/env.yaml', priority: 0, spec: env }]);
  assert.throws(() => editsFor(['vendor.com/gpu=gpu0', 'other.org/env=a'], both, ['/etc/cdi']),
    /CDI device "vendor.com\/gpu=gpu0" and CDI device "other.org\/env=a" conflict: they set environment variable GPU0 differently \(on and off\)/);
  assert.doesNotThrow(() => editsFor(['vendor.com/gpu=gpu0', 'other.org/env=b'], both, ['/etc/cdi']), 'the same value twice is no conflict');
});

test('edits apply to the spec in order: env, device nodes and their cgroup rule, mounts by depth, hooks, gids', () => {
  const spec = baseSpec('/rootfs');
  spec.process!.env = ['PATH=/bin', 'GPU=old'];
  spec.process!.user = { uid: 0, gid: 0, additionalGids: [0] };
  spec.mounts = [{ destination: '/usr/lib/gpu/sub', source: '/x', options: ['bind'] }, { destination: '/data', source: '/y', options: ['bind'] }];
  applyOpts(spec, [withCdiEdits([
    { owner: 'spec', edits: { env: ['GPU_DRIVER=9'], mounts: [{ hostPath: '/opt/gpu/lib', containerPath: '/usr/lib/gpu', options: ['ro', 'bind'] }, { hostPath: '/d2', containerPath: '/data/' }], additionalGids: [44, 0] } },
    { owner: 'dev', edits: { env: ['GPU=0'], deviceNodes: [{ path: '/dev/gpu0', type: 'c', major: 195, minor: 0, fileMode: 0o660 }, { path: '/dev/fifo', type: 'p' }], additionalGids: [44, 45],
      hooks: [{ hookName: 'createContainer', path: '/usr/bin/hook', args: ['hook'] }] } },
  ])]);
  assert.deepEqual(spec.process!.env, ['PATH=/bin', 'GPU=0', 'GPU_DRIVER=9']);
  assert.deepEqual(spec.process!.user.additionalGids, [0, 44, 45]);
  const devices = spec.linux!.devices!.filter((d) => d.path.startsWith('/dev/gpu') || d.path === '/dev/fifo');
  assert.deepEqual(devices, [{ path: '/dev/gpu0', type: 'c', major: 195, minor: 0, fileMode: 0o660 }, { path: '/dev/fifo', type: 'p', major: 0, minor: 0 }]);
  assert.deepEqual(spec.linux!.resources!.devices!.at(-1), { allow: true, type: 'c', major: 195, minor: 0, access: 'rwm' });
  const dests = spec.mounts!.map((m) => m.destination);
  assert.ok(dests.indexOf('/usr/lib/gpu') < dests.indexOf('/usr/lib/gpu/sub'), 'a parent mount comes before its child');
  assert.equal(spec.mounts!.filter((m) => m.destination.startsWith('/data')).length, 1, 'a CDI mount replaces the one at the same place');
  assert.deepEqual(spec.mounts!.find((m) => m.destination === '/usr/lib/gpu'), { destination: '/usr/lib/gpu', source: '/opt/gpu/lib', options: ['ro', 'bind'] });
  assert.deepEqual(spec.hooks, { createContainer: [{ path: '/usr/bin/hook', args: ['hook'] }] });
  assert.throws(() => applyOpts(baseSpec('/r'), [withCdiEdits([{ owner: 'dev', edits: { deviceNodes: [{ path: '/dev/x' }] } }])]), /dev: device node \/dev\/x has no type/);
});

test('the registry reads its directories again when a file changes and completes device nodes from the host', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'minicri-cdi-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const fakeStat = async (path: string): Promise<NodeStat> => {
    if (path !== '/dev/host-gpu') throw new Error('ENOENT: no such file');
    return { isCharacterDevice: () => true, isBlockDevice: () => false, isFIFO: () => false, rdev: (10 << 8) | 200, mode: 0o20666 };
  };
  const registry = new CdiRegistry([join(dir, 'none'), dir], silentLogger, fakeStat);
  assert.deepEqual(await registry.inventory(), { devices: [], errors: {} });
  await writeFile(join(dir, 'gpu.yaml'), 'cdiVersion: "0.5.0"\nkind: v.com/gpu\ndevices:\n  - {name: a, containerEdits: {deviceNodes: [{path: /dev/gpu, hostPath: /dev/host-gpu}]}}\n  - {name: gone, containerEdits: {deviceNodes: [{path: /dev/nothing}]}}\n');
  await writeFile(join(dir, 'broken.json'), '{');
  const inv = await registry.inventory();
  assert.deepEqual(inv.devices, ['v.com/gpu=a', 'v.com/gpu=gone']);
  assert.match(inv.errors[join(dir, 'broken.json')]!, /cannot be parsed/);
  const [edits] = await registry.resolve(['v.com/gpu=a']);
  assert.deepEqual(edits!.edits.deviceNodes, [{ path: '/dev/gpu', hostPath: '/dev/host-gpu', type: 'c', major: 10, minor: 200, fileMode: 0o666 }]);
  await assert.rejects(registry.resolve(['v.com/gpu=gone']), /CDI device "v.com\/gpu=gone": device node \/dev\/nothing cannot be found on this node/);
  await assert.rejects(registry.resolve(['v.com/gpu=b']), (e: Error) => e instanceof InvalidArgument && e.message.includes('broken.json'));
  await rm(join(dir, 'gpu.yaml'));
  assert.deepEqual((await registry.inventory()).devices, []);
  assert.deepEqual(deviceNumbers((1 << 8) | 3), { major: 1, minor: 3 });
  assert.deepEqual(deviceNumbers(0x0123_4567), { major: 0x345, minor: 0x01267 });
});

test('one owner per network device: a netDevices edit is never applied at CreateContainer; one whose interface is still on the host is refused', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'minicri-cdi-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const onHost = new Set(['ens1f0v2']);
  const registry = new CdiRegistry([dir], silentLogger, undefined, async (name) => onHost.has(name));
  await writeFile(join(dir, 'net.yaml'), [
    'cdiVersion: "1.1.0"', 'kind: net.example.com/vf', 'devices:',
    '  - {name: moved, containerEdits: {env: [VF=1], netDevices: [{hostInterfaceName: ens1f0v1, name: net1}]}}',
    '  - {name: stranded, containerEdits: {netDevices: [{hostInterfaceName: ens1f0v2, name: net2}]}}', '',
  ].join('\n'));
  // Moved into the pod by its network's plugin: gone from the host, so only the device's other edits apply.
  assert.deepEqual(await registry.resolve(['net.example.com/vf=moved']), [{ owner: 'CDI device "net.example.com/vf=moved"', edits: { env: ['VF=1'] } }]);
  await assert.rejects(registry.resolve(['net.example.com/vf=stranded']), (e: Error) => e instanceof InvalidArgument &&
    /CDI device "net\.example\.com\/vf=stranded" moves host interface ens1f0v2 into the container \(netDevices\), which minicri leaves to the pod's network that owns the device/.test(e.message));
});
