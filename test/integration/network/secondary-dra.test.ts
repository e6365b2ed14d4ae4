// Secondary networks backed by DRA claims, node-local: a test pod-resources server reports the pod's claims
// as kubelet does, a CDI spec dir is written as a DRA driver would, and real plugins take the devices:
// host-device moves the test's ifb links into the pod and back, the recording plugin shows exactly what a
// plugin is told. Also the cni-args gating by the definition's capabilities (#31).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { CdiRegistry } from '../../../cdi/registry.js';
import { CniManager, DEVICE_STATUS_FILE, type PodNetworkRequest } from '../../../cni/manager.js';
import type { PodDeviceStatusFile } from '../../../cni/dra.js';
import { PodResourcesClient } from '../../../cni/pod-resources.js';
import { InvalidArgument } from '../../../core/errors.js';
import { silentLogger } from '../../../core/log.js';
import { removePodNetns } from '../../../netns/netns.js';
import { inNetns, makeTestNet, recordedCalls, type TestNet } from '../../support/cni-env.js';
import { checkThenClean, hostSnapshot, networkFixtureObjects, type HostSnapshot } from '../../support/leaks.js';
import { startPodResourcesServer, type FakeClaim, type PodResourcesServer } from '../../support/pod-resources-server.js';

const N = 57;
const LINK_A = `mcnt-da${N}`;
const LINK_B = `mcnt-db${N}`;
const DRIVER = 'net.example.com';
const KIND = 'net.example.com/vf';
const NS = 'mcnt';

let net: TestNet;
let netsDir: string;
let cdiDir: string;
let statusDir: string;
let snapshot: HostSnapshot;
let server: PodResourcesServer;

function nad(name: string, config: Record<string, unknown>, annotations: Record<string, string>) {
  return { apiVersion: 'k8s.cni.cncf.io/v1', kind: 'NetworkAttachmentDefinition', metadata: { name, namespace: NS, annotations }, spec: { config: JSON.stringify(config) } };
}

async function writeDefinitions(defs: unknown[]): Promise<void> {
  await rm(netsDir, { recursive: true, force: true });
  await mkdir(netsDir, { recursive: true });
  await writeFile(path.join(netsDir, 'defs.json'), JSON.stringify({ apiVersion: 'v1', kind: 'List', items: defs }));
}

/** The CDI spec a DRA driver writes for the devices it prepared: two netdevs, two VFs known by PCI address. */
async function writeCdiSpec(): Promise<void> {
  await writeFile(path.join(cdiDir, 'net.example.com-claims.json'), JSON.stringify({
    cdiVersion: '1.1.0', kind: KIND,
    devices: [
      { name: 'link-a', containerEdits: { netDevices: [{ hostInterfaceName: LINK_A, name: 'net1' }] } },
      { name: 'link-b', containerEdits: { netDevices: [{ hostInterfaceName: LINK_B, name: 'net2' }] } },
      { name: 'vf-3', annotations: { 'dra.minicri.io/pci-address': '0000:3b:02.3' }, containerEdits: {} },
      { name: 'vf-4', containerEdits: { env: ['VF_PCI_ADDRESS=0000:3b:02.4'] } },
    ],
  }));
}

const device = (name: string, pool = 'node-1') => ({ driver: DRIVER, pool, device: name, cdiDevices: [`${KIND}=${name}`] });
const claimsOf: Record<string, FakeClaim[]> = {
  // Two claims, one device each, listed by different containers.
  two: [{ name: 'two-net-a-k2x9q', devices: [device('link-a')], containers: ['app'] }, { name: 'uplink', devices: [device('link-b')], containers: ['side'] }],
  rec: [{ name: 'vfs', devices: [device('vf-3'), device('vf-4')] }],
  pending: [{ name: 'later', devices: [] }],
  nocdi: [{ name: 'orphan', devices: [{ driver: DRIVER, pool: 'node-1', device: 'gone', cdiDevices: [`${KIND}=gone`] }] }],
};

let seq = 0;
async function pod(t: { after: (fn: () => unknown) => void }, name: string, annotations: Record<string, string>): Promise<PodNetworkRequest> {
  const ns = await net.podNetns(`mcnt-${name}`);
  t.after(() => removePodNetns(ns));
  const id = `${(++seq).toString(16)}d${'0'.repeat(64)}`.slice(0, 64);
  return { sandboxId: id, name, namespace: NS, uid: `uid-${name}`, netnsPath: ns.path, portMappings: [], annotations };
}

async function manager(t: { after: (fn: () => unknown) => void }): Promise<CniManager> {
  const m = await CniManager.create({
    confDir: net.confDir, binDirs: net.binDirs, cacheDir: net.cacheDir, networksDir: netsDir, log: silentLogger, watch: false,
    podResources: new PodResourcesClient(server.socket), cdi: new CdiRegistry([cdiDir], silentLogger), deviceStatusDir: statusDir,
  });
  t.after(() => m.close());
  return m;
}

const links = async (nsPath: string) => (await inNetns(nsPath, ['ip', '-o', 'link'])).split('\n').map((l) => l.split(':')[1]!.trim().split('@')[0]!).sort();
const macIn = async (nsPath: string, dev: string) => /link\/ether (\S+)/.exec(await inNetns(nsPath, ['ip', '-o', 'link', 'show', dev]))![1]!;
const hostMac = async (dev: string) => /link\/ether (\S+)/.exec((await execa('ip', ['-o', 'link', 'show', dev])).stdout)![1]!;
const onHost = async (dev: string) => (await execa('ip', ['link', 'show', dev], { reject: false })).exitCode === 0;
const cacheFiles = async () => (await readdir(path.join(net.cacheDir, 'results')).catch(() => [] as string[])).sort();
const clearRecords = async () => { await rm(net.recordDir, { recursive: true, force: true }); await mkdir(net.recordDir); };

before(async () => {
  snapshot = await hostSnapshot();
  net = await makeTestNet(N);
  await net.writeBridgeConf();
  netsDir = path.join(net.root, 'networks.d');
  cdiDir = path.join(net.root, 'cdi');
  statusDir = path.join(net.root, 'pods');
  await mkdir(cdiDir);
  await writeCdiSpec();
  for (const link of [LINK_A, LINK_B]) await execa('ip', ['link', 'add', link, 'type', 'ifb']);
  server = await startPodResourcesServer(Object.entries(claimsOf).map(([name, claims]) => ({ namespace: NS, name, devices: {}, claims, containers: ['app', 'side'] })));
});

after(async () => {
  await server?.close();
  const fixtureLinks = [...networkFixtureObjects(net.bridge).links!, `ifb ${LINK_A}`, `ifb ${LINK_B}`];
  await checkThenClean(snapshot, 'the DRA secondary network tests', { links: fixtureLinks, iptables: networkFixtureObjects(net.bridge).iptables! }, async () => {
    for (const link of [LINK_A, LINK_B]) await execa('ip', ['link', 'del', link], { reject: false });
    await net.cleanup();
  });
});

describe('DRA-backed secondary networks', () => {
  it('two claims give two interfaces, each its own device moved in by host-device, reported in KEP-4817 shape; a restart between ADD and DEL gives them back', async (t) => {
    await writeDefinitions([nad('dra-net', { cniVersion: '1.0.0', name: `mcnt-dra${N}`, type: 'host-device' }, { 'dra.minicri.io/driver': DRIVER })]);
    const macs = { a: await hostMac(LINK_A), b: await hostMac(LINK_B) };
    const m = await manager(t);
    const p = await pod(t, 'two', { 'k8s.v1.cni.cncf.io/networks': 'dra-net, dra-net' });
    t.after(() => m.tearDownPod(p).catch(() => {}));
    const s = await m.setUpPod(p);
    assert.deepEqual(await links(p.netnsPath), ['eth0', 'lo', 'net1', 'net2']);
    assert.equal(await macIn(p.netnsPath, 'net1'), macs.a, 'the first claim\'s device is net1');
    assert.equal(await macIn(p.netnsPath, 'net2'), macs.b, 'the second claim\'s device is net2');
    assert.ok(!(await onHost(LINK_A)) && !(await onHost(LINK_B)), 'both links left the host');

    const expected = [[`two-net-a-k2x9q`, 'link-a', 'net1', macs.a], ['uplink', 'link-b', 'net2', macs.b]];
    assert.deepEqual(s.deviceStatus!.map((d) => [d.claim.name, d.status.device, d.status.networkData.interfaceName, d.status.networkData.hardwareAddress]), expected);
    assert.deepEqual(s.deviceStatus![0]!.status, {
      driver: DRIVER, pool: 'node-1', device: 'link-a', data: s.networkStatus[1],
      networkData: { interfaceName: 'net1', hardwareAddress: macs.a },
    });
    assert.deepEqual(s.deviceStatus!.map((d) => [d.network, d.cdiDevice, d.deviceId]), [[`${NS}/dra-net`, `${KIND}=link-a`, LINK_A], [`${NS}/dra-net`, `${KIND}=link-b`, LINK_B]]);
    const file = path.join(statusDir, p.sandboxId, DEVICE_STATUS_FILE);
    const written = JSON.parse(await readFile(file, 'utf8')) as PodDeviceStatusFile;
    assert.deepEqual(written, { pod: { namespace: NS, name: 'two', uid: 'uid-two', sandboxId: p.sandboxId }, devices: s.deviceStatus, networkStatus: s.networkStatus });
    assert.deepEqual(await m.deviceStatus(p.sandboxId), written);
    assert.deepEqual((await readdir(path.dirname(file))), [DEVICE_STATUS_FILE], 'no temp file left beside it');

    // A restart that finds the definitions gone: the cache alone knows which device each interface has.
    m.close();
    await rm(netsDir, { recursive: true, force: true });
    const restarted = await manager(t);
    await restarted.tearDownPod(p);
    assert.ok((await onHost(LINK_A)) && (await onHost(LINK_B)), 'both links are back on the host');
    assert.equal(await hostMac(LINK_A), macs.a);
    assert.deepEqual(await links(p.netnsPath), ['lo']);
    assert.deepEqual(await cacheFiles(), []);
    await assert.rejects(stat(path.dirname(file)), { code: 'ENOENT' }, 'the status file went with the devices');
    assert.equal(await restarted.deviceStatus(p.sandboxId), undefined);
  });

  it('the plugin gets exactly the device: in its config, or as runtimeConfig.deviceID when it declares the capability; a claim named by the definition', async (t) => {
    const rec = (name: string, capability: boolean, annotations: Record<string, string>) =>
      nad(name, { cniVersion: '1.1.0', name: `mcnt-${name}${N}`, type: 'mcnt-record', recordDir: net.recordDir, ...(capability ? { capabilities: { deviceID: true } } : {}) }, annotations);
    await writeDefinitions([
      rec('rec-cfg', false, { 'dra.minicri.io/driver': DRIVER, 'dra.minicri.io/claim': 'vfs' }),
      rec('rec-cap', true, { 'dra.minicri.io/driver': DRIVER, 'dra.minicri.io/pool': 'node-1' }),
    ]);
    const m = await manager(t);
    const p = await pod(t, 'rec', { 'k8s.v1.cni.cncf.io/networks': 'rec-cfg, rec-cap' });
    await clearRecords();
    const s = await m.setUpPod(p);
    const adds = (await recordedCalls(net.recordDir)).filter((c) => c.env.CNI_COMMAND === 'ADD').sort((a, b) => a.env.CNI_IFNAME!.localeCompare(b.env.CNI_IFNAME!));
    assert.deepEqual(adds.map((c) => [c.env.CNI_IFNAME, c.stdin.deviceID, c.stdin.runtimeConfig]), [
      ['net1', '0000:3b:02.3', undefined],
      ['net2', undefined, { deviceID: '0000:3b:02.4' }],
    ]);
    assert.deepEqual(s.networkStatus[1]!['device-info'], { type: 'pci', version: '1.0.0', pci: { 'pci-address': '0000:3b:02.3' } });
    assert.deepEqual(s.deviceStatus!.map((d) => [d.claim.name, d.status.device, d.status.networkData]), [['vfs', 'vf-3', { interfaceName: 'net1' }], ['vfs', 'vf-4', { interfaceName: 'net2' }]]);
    await m.tearDownPod(p);
    const dels = (await recordedCalls(net.recordDir)).filter((c) => c.env.CNI_COMMAND === 'DEL');
    assert.deepEqual(dels.map((c) => [c.env.CNI_IFNAME, c.stdin.deviceID ?? (c.stdin.runtimeConfig as { deviceID: string }).deviceID]), [['net2', '0000:3b:02.4'], ['net1', '0000:3b:02.3']]);
    assert.deepEqual(await cacheFiles(), []);
    assert.ok(server.calls.includes(`Get ${NS}/rec`));
  });

  it('refuses, naming the claim, a claim not allocated, a device without a CDI spec, a claim kubelet does not report; nothing is attached', async (t) => {
    await writeDefinitions([
      nad('any', { cniVersion: '1.0.0', name: `mcnt-any${N}`, type: 'host-device' }, { 'dra.minicri.io/driver': DRIVER }),
      nad('named', { cniVersion: '1.0.0', name: `mcnt-named${N}`, type: 'host-device' }, { 'dra.minicri.io/driver': DRIVER, 'dra.minicri.io/claim': 'uplink' }),
    ]);
    const m = await manager(t);
    const cases: [string, string, RegExp][] = [
      ['pending', 'any', /claim "later" is not allocated yet/],
      ['nocdi', 'any', /device net\.example\.com\/node-1\/gone of claim mcnt\/orphan has no CDI spec on this node/],
      ['rec', 'named', /does not hold claim "uplink" \(it holds "vfs"\): kubelet reports a claim only when a container lists it in resources\.claims/],
      ['two', 'any, any, any', /network mcnt\/any needs a device of DRA driver "net\.example\.com" for pod mcnt\/two, but the pod's 2 such device\(s\) are all taken/],
    ];
    for (const [name, networks, re] of cases) {
      const p = await pod(t, name, { 'k8s.v1.cni.cncf.io/networks': networks });
      await assert.rejects(m.setUpPod(p), (err: unknown) => err instanceof InvalidArgument && re.test(err.message), re.source);
      assert.deepEqual(await links(p.netnsPath), ['lo'], name);
    }
    assert.deepEqual(await cacheFiles(), []);
    assert.ok((await onHost(LINK_A)) && (await onHost(LINK_B)));
    assert.deepEqual(await readdir(statusDir).catch(() => []), []);
  });
});

describe('cni-args gated by the definition\'s capabilities (#31)', () => {
  it('IP and MAC cni-args reach CNI_ARGS and args.cni only on a network declaring ips and mac', async (t) => {
    const rec = (name: string, capabilities: Record<string, boolean>) =>
      nad(name, { cniVersion: '1.1.0', name: `mcnt-${name}${N}`, type: 'mcnt-record', recordDir: net.recordDir, capabilities }, {});
    await writeDefinitions([rec('open', { ips: true, mac: true }), rec('closed', {})]);
    const m = await manager(t);
    const cniArgs = { IP: '10.99.0.7/24', MAC: '02:00:00:00:99:07', color: 'blue' };
    const p = await pod(t, 'args', {
      'k8s.v1.cni.cncf.io/networks': JSON.stringify([{ name: 'open', 'cni-args': cniArgs }, { name: 'closed', 'cni-args': cniArgs }]),
    });
    await clearRecords();
    await m.setUpPod(p);
    const adds = (await recordedCalls(net.recordDir)).filter((c) => c.env.CNI_COMMAND === 'ADD');
    const byIf = Object.fromEntries(adds.map((c) => [c.env.CNI_IFNAME, c]));
    assert.match(byIf.net1!.env.CNI_ARGS!, /;IP=10\.99\.0\.7\/24;MAC=02:00:00:00:99:07;color=blue$/);
    assert.deepEqual((byIf.net1!.stdin.args as { cni: unknown }).cni, cniArgs);
    assert.match(byIf.net2!.env.CNI_ARGS!, /K8S_POD_UID=uid-args;color=blue$/);
    assert.deepEqual((byIf.net2!.stdin.args as { cni: unknown }).cni, { color: 'blue' });
    await m.tearDownPod(p);
    assert.deepEqual(await cacheFiles(), []);
  });
});
