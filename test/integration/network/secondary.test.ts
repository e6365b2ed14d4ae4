// Secondary networks with the real plugins: macvlan on a master link the test makes, a second bridge,
// host-device, and the mcnt-* test plugins. The links the test makes are ifb devices: standalone links
// like dummy ones, which kernels without the dummy driver (this test machine's) still have. Every network is private (10.233-10.239.<n>.0/24),
// with no gateway on the host and no route out; traffic only between the test's own pod namespaces.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { CniManager, type PodNetworkRequest } from '../../../cni/manager.js';
import { removePodNetns } from '../../../netns/netns.js';
import { PodResourcesClient } from '../../../cni/pod-resources.js';
import { InvalidArgument, Unavailable } from '../../../core/errors.js';
import { silentLogger } from '../../../core/log.js';
import { inNetns, makeTestNet, recordedCalls, waitFor, type TestNet } from '../../support/cni-env.js';
import { checkThenClean, hostSnapshot, networkFixtureObjects, type HostSnapshot } from '../../support/leaks.js';
import { startPodResourcesServer, type PodResourcesServer } from '../../support/pod-resources-server.js';

const N = 51;
const DUMMY = `mcnt-dm${N}`;
const BRIDGE2 = `mcnt-sb${N}`;
const HOSTDEV = `mcnt-hd${N}`;
const MACVLAN_NET = `mcnt-mv${N}`;
const BRIDGE2_NET = `mcnt-b2${N}`;
const MACVLAN_SUBNET = `10.234.${N}`;
const BRIDGE2_SUBNET = `10.237.${N}`;
const ROUTED = `10.238.${N}.0/24`;
const RESOURCE = 'example.com/mcnt-vf';

let net: TestNet;
let netsDir: string;
let snapshot: HostSnapshot;

function nad(name: string, config: Record<string, unknown> | undefined, opts: { namespace?: string; resourceName?: string } = {}) {
  return {
    apiVersion: 'k8s.cni.cncf.io/v1',
    kind: 'NetworkAttachmentDefinition',
    metadata: { name, namespace: opts.namespace ?? 'mcnt', ...(opts.resourceName ? { annotations: { 'k8s.v1.cni.cncf.io/resourceName': opts.resourceName } } : {}) },
    spec: { config: config ? JSON.stringify(config) : '' },
  };
}

const macvlan = () => nad('macvlan-a', {
  cniVersion: '1.0.0', name: MACVLAN_NET, type: 'macvlan', master: DUMMY, mode: 'bridge',
  ipam: { type: 'host-local', ranges: [[{ subnet: `${MACVLAN_SUBNET}.0/24` }]], routes: [{ dst: ROUTED, gw: `${MACVLAN_SUBNET}.1` }], dataDir: net.dataDir },
});
const bridge2 = (extra: Record<string, unknown>[] = []) => nad('bridge-b', {
  cniVersion: '1.0.0', name: BRIDGE2_NET,
  plugins: [{
    type: 'bridge', bridge: BRIDGE2, isGateway: false, ipMasq: false, capabilities: { ips: true, mac: true },
    ipam: { type: 'host-local', ranges: [[{ subnet: `${BRIDGE2_SUBNET}.0/24` }]], dataDir: net.dataDir },
  }, ...extra],
}, { namespace: 'other' });

/** Writes the definitions: a kubectl-style List as YAML-compatible JSON, plus one plain YAML file. */
async function writeDefinitions(defs: unknown[]): Promise<void> {
  await rm(netsDir, { recursive: true, force: true });
  await mkdir(netsDir, { recursive: true });
  await writeFile(path.join(netsDir, '10-list.json'), JSON.stringify({ apiVersion: 'v1', kind: 'List', items: defs.slice(1) }));
  if (defs[0]) await writeFile(path.join(netsDir, '05-first.yaml'), `# dropped in as kubectl prints it\n---\n${JSON.stringify(defs[0])}\n`);
}

async function allocated(network: string): Promise<string[]> {
  return (await readdir(path.join(net.dataDir, network)).catch(() => [] as string[])).filter((f) => /^\d+\.\d+\.\d+\.\d+$/.test(f)).sort();
}

async function allAllocated(): Promise<string[]> {
  return [...(await net.allocatedIps()), ...(await allocated(MACVLAN_NET)), ...(await allocated(BRIDGE2_NET))];
}

async function cacheFiles(): Promise<string[]> {
  return (await readdir(path.join(net.cacheDir, 'results')).catch(() => [] as string[])).sort();
}

async function manager(t: { after: (fn: () => unknown) => void }, podResources?: PodResourcesClient): Promise<CniManager> {
  const m = await CniManager.create({ confDir: net.confDir, binDirs: net.binDirs, cacheDir: net.cacheDir, networksDir: netsDir, log: silentLogger, watch: false, ...(podResources ? { podResources } : {}) });
  t.after(() => m.close());
  return m;
}

let seq = 0;
async function pod(t: { after: (fn: () => unknown) => void }, name: string, annotations: Record<string, string>): Promise<PodNetworkRequest> {
  const ns = await net.podNetns(`mcnt-${name}`);
  t.after(() => removePodNetns(ns));
  const id = `${(++seq).toString(16)}${name.replace(/[^a-f0-9]/g, '')}${'0'.repeat(64)}`.slice(0, 64);
  return { sandboxId: id, name, namespace: 'mcnt', uid: `uid-${name}`, netnsPath: ns.path, portMappings: [], annotations };
}

const links = async (nsPath: string) => (await inNetns(nsPath, ['ip', '-o', 'link'])).split('\n').map((l) => l.split(':')[1]!.trim().split('@')[0]!).sort();
const addr4 = async (nsPath: string, dev: string) => /inet (\S+)/.exec(await inNetns(nsPath, ['ip', '-o', '-4', 'addr', 'show', 'dev', dev]))?.[1] ?? '';

before(async () => {
  snapshot = await hostSnapshot();
  net = await makeTestNet(N);
  await net.writeBridgeConf();
  netsDir = path.join(net.root, 'networks.d');
  await execa('ip', ['link', 'add', DUMMY, 'type', 'ifb']);
  await execa('ip', ['link', 'set', DUMMY, 'up']);
});

after(async () => {
  const fixtureLinks = [...networkFixtureObjects(net.bridge).links!, `bridge ${BRIDGE2}`, `ifb ${DUMMY}`, `ifb ${HOSTDEV}`];
  await checkThenClean(snapshot, 'the secondary network tests', { links: fixtureLinks, iptables: networkFixtureObjects(net.bridge).iptables! }, async () => {
    for (const link of [DUMMY, BRIDGE2, HOSTDEV]) await execa('ip', ['link', 'del', link], { reject: false });
    await net.cleanup();
  });
});

describe('secondary networks', () => {
  it('gives a pod eth0, net1 and net2 from each range with the configured routes; two pods reach each other on each', async (t) => {
    await writeDefinitions([macvlan(), bridge2()]);
    const m = await manager(t);
    const annotations = { 'k8s.v1.cni.cncf.io/networks': 'macvlan-a, other/bridge-b' };
    const a = await pod(t, 'a', annotations);
    const b = await pod(t, 'b', annotations);
    t.after(() => m.tearDownPod(a).catch(() => {}));
    t.after(() => m.tearDownPod(b).catch(() => {}));
    const sa = await m.setUpPod(a);
    // CHECK covers every attachment (right away: the bridge plugin's CHECK also compares the bridge's MAC, which changes as ports join).
    await m.checkPod(a);
    const sb = await m.setUpPod(b);

    assert.deepEqual(await links(a.netnsPath), ['eth0', 'lo', 'net1', 'net2']);
    assert.equal(sa.ips.length, 1, 'the pod IP is the default network\'s alone');
    assert.match(sa.ips[0]!, new RegExp(`^10\\.233\\.${N}\\.`));
    assert.match(await addr4(a.netnsPath, 'net1'), new RegExp(`^${MACVLAN_SUBNET.replace(/\./g, '\\.')}\\.\\d+/24$`));
    assert.match(await addr4(a.netnsPath, 'net2'), new RegExp(`^${BRIDGE2_SUBNET.replace(/\./g, '\\.')}\\.\\d+/24$`));
    assert.match(await inNetns(a.netnsPath, ['ip', 'route']), new RegExp(`${ROUTED.replace(/\./g, '\\.')} via ${MACVLAN_SUBNET.replace(/\./g, '\\.')}\\.1 dev net1`));
    assert.doesNotMatch(await inNetns(a.netnsPath, ['ip', 'route']), /default/);

    // The network status as multus writes it: eth0 default, then each secondary one by namespace/name.
    assert.deepEqual(sa.networkStatus.map((e) => [e.name, e.interface, e.default ?? false]), [[net.networkName, 'eth0', true], ['mcnt/macvlan-a', 'net1', false], ['other/bridge-b', 'net2', false]]);
    const net1 = (await addr4(b.netnsPath, 'net1')).split('/')[0]!;
    const net2 = (await addr4(b.netnsPath, 'net2')).split('/')[0]!;
    assert.deepEqual(sb.networkStatus[1]!.ips, [net1]);
    assert.match(sb.networkStatus[1]!.mac ?? '', /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);
    await inNetns(a.netnsPath, ['busybox', 'ping', '-c', '1', '-W', '3', '-I', 'net1', net1]);
    await inNetns(a.netnsPath, ['busybox', 'ping', '-c', '1', '-W', '3', '-I', 'net2', net2]);

    assert.deepEqual((await cacheFiles()).filter((f) => f.includes(a.sandboxId)), [
      `cni-loopback-${a.sandboxId}-lo`, `${MACVLAN_NET}-${a.sandboxId}-net1`, `${BRIDGE2_NET}-${a.sandboxId}-net2`, `${net.networkName}-${a.sandboxId}-eth0`,
    ].sort());
    assert.equal((await allAllocated()).length, 6);
    await m.tearDownPod(a);
    await m.tearDownPod(b);
    assert.deepEqual(await allAllocated(), []);
    assert.deepEqual(await cacheFiles(), []);
    assert.deepEqual(await links(a.netnsPath), ['lo']);
  });

  it('honours named interfaces, static ips and mac, cni-args, default-route; after a restart with the definitions gone, teardown releases every address', async (t) => {
    await writeDefinitions([macvlan(), bridge2([{ type: 'mcnt-record', recordDir: net.recordDir, capabilities: { mac: true } }])]);
    const m = await manager(t);
    const p = await pod(t, 'c', {
      'k8s.v1.cni.cncf.io/networks': JSON.stringify([
        { name: 'bridge-b', namespace: 'other', interface: 'fast0', ips: [`${BRIDGE2_SUBNET}.77/24`], mac: '02:00:00:00:4d:01', 'cni-args': { color: 'blue' } },
        // A default route over the macvlan: its master is an ifb link, which sends nothing anywhere.
        { name: 'macvlan-a', interface: 'slow0', 'default-route': [`${MACVLAN_SUBNET}.1`] },
      ]),
    });
    t.after(() => m.tearDownPod(p).catch(() => {}));
    const status = await m.setUpPod(p);
    assert.deepEqual(await links(p.netnsPath), ['eth0', 'fast0', 'lo', 'slow0']);
    assert.match(await inNetns(p.netnsPath, ['ip', 'route', 'show', 'default']), new RegExp(`^default via ${MACVLAN_SUBNET.replace(/\./g, '\\.')}\\.1 dev slow0`));
    assert.deepEqual(status.networkStatus[2], { ...status.networkStatus[2], name: 'mcnt/macvlan-a', interface: 'slow0', gateway: [`${MACVLAN_SUBNET}.1`] });
    assert.equal(await addr4(p.netnsPath, 'fast0'), `${BRIDGE2_SUBNET}.77/24`);
    assert.match(await inNetns(p.netnsPath, ['ip', '-o', 'link', 'show', 'fast0']), /link\/ether 02:00:00:00:4d:01/);
    const [add] = (await recordedCalls(net.recordDir)).filter((c) => c.env.CNI_COMMAND === 'ADD');
    assert.equal(add!.env.CNI_IFNAME, 'fast0');
    assert.match(add!.env.CNI_ARGS!, new RegExp(`K8S_POD_NAMESPACE=mcnt;K8S_POD_NAME=c;K8S_POD_INFRA_CONTAINER_ID=${p.sandboxId};K8S_POD_UID=uid-c;color=blue$`));
    assert.deepEqual(add!.stdin.runtimeConfig, { mac: '02:00:00:00:4d:01' }, 'each plugin gets only the capabilities it declares');

    // A restart that finds no definitions at all: the cache alone drives the DELs.
    m.close();
    await rm(netsDir, { recursive: true, force: true });
    const restarted = await manager(t);
    assert.equal((await allAllocated()).length, 3);
    await restarted.tearDownPod(p);
    assert.deepEqual(await allAllocated(), []);
    assert.deepEqual(await cacheFiles(), []);
    const dels = (await recordedCalls(net.recordDir)).filter((c) => c.env.CNI_COMMAND === 'DEL');
    assert.equal(dels.length, 1);
    assert.equal(dels[0]!.env.CNI_ARGS, add!.env.CNI_ARGS, 'DEL gets exactly what ADD got');
    await rm(net.recordDir, { recursive: true, force: true });
    await mkdir(net.recordDir);
  });

  it('follows the networks dir: a definition dropped in is used without a restart', async (t) => {
    await writeDefinitions([macvlan()]);
    const m = await CniManager.create({ confDir: net.confDir, binDirs: net.binDirs, cacheDir: net.cacheDir, networksDir: netsDir, log: silentLogger });
    t.after(() => m.close());
    const p = await pod(t, 'w', { 'k8s.v1.cni.cncf.io/networks': 'other/bridge-b' });
    await assert.rejects(m.setUpPod(p), /network other\/bridge-b is not defined/);
    await writeFile(path.join(netsDir, '20-late.json'), JSON.stringify(bridge2()));
    await waitFor(async () => m.setUpPod(p).then(() => true, () => false), 5000, 'the new definition to be picked up');
    assert.deepEqual(await links(p.netnsPath), ['eth0', 'lo', 'net1']);
    await m.tearDownPod(p);
    assert.deepEqual(await allAllocated(), []);
  });

  it('a failing second attachment leaves no address in any range, no interface and no cache entry', async (t) => {
    await writeDefinitions([macvlan(), bridge2([{ type: 'mcnt-fail' }])]);
    const m = await manager(t);
    const p = await pod(t, 'd', { 'k8s.v1.cni.cncf.io/networks': 'macvlan-a, other/bridge-b' });
    t.after(() => m.tearDownPod(p).catch(() => {}));
    await assert.rejects(m.setUpPod(p), /mcnt-fail refuses ADD/);
    assert.deepEqual(await allAllocated(), []);
    assert.deepEqual(await cacheFiles(), []);
    assert.deepEqual(await links(p.netnsPath), ['lo']);
  });

  it('refuses bad annotations with a clear error before any plugin runs', async (t) => {
    await writeDefinitions([macvlan(), bridge2()]);
    const m = await manager(t);
    const cases: [Record<string, string>, RegExp][] = [
      [{ 'k8s.v1.cni.cncf.io/networks': '[{"name": "macvlan-a"' }, /is not valid JSON/],
      [{ 'k8s.v1.cni.cncf.io/networks': 'macvlan-a, nope' }, /network mcnt\/nope is not defined/],
      [{ 'k8s.v1.cni.cncf.io/networks': 'macvlan-a@x0, other/bridge-b@x0' }, /interface x0, which network mcnt\/macvlan-a already uses/],
      [{ 'k8s.v1.cni.cncf.io/networks': 'Not_A_Label/bridge-b' }, /namespace "Not_A_Label" is not a valid namespace name/],
    ];
    const p = await pod(t, 'e', {});
    for (const [annotations, re] of cases) {
      await assert.rejects(m.setUpPod({ ...p, annotations }), (err: unknown) => err instanceof InvalidArgument && re.test(err.message));
    }
    assert.deepEqual(await allAllocated(), []);
    assert.deepEqual(await cacheFiles(), []);
    assert.deepEqual(await links(p.netnsPath), ['lo']);
  });
});

describe('device-backed networks', () => {
  let server: PodResourcesServer;
  before(async () => {
    server = await startPodResourcesServer([{ namespace: 'mcnt', name: 'dev', devices: { [RESOURCE]: ['0000:00:1f.1', '0000:00:1f.2'], 'other.com/x': ['x1'] } }, { namespace: 'mcnt', name: 'hd', devices: { [RESOURCE]: [HOSTDEV] } }]);
  });
  after(() => server.close());

  const recordNet = (capability: boolean) => nad('vf', {
    cniVersion: '1.1.0', name: `mcnt-vf${N}`, type: 'mcnt-record', recordDir: net.recordDir, ...(capability ? { capabilities: { deviceID: true } } : {}),
  }, { resourceName: RESOURCE });

  it('gives each attachment of the network its own device of the pod, in the config or as runtimeConfig.deviceID', async (t) => {
    const m = await manager(t, new PodResourcesClient(server.socket));
    for (const capability of [false, true]) {
      await writeDefinitions([macvlan(), recordNet(capability)]);
      const p = await pod(t, 'dev', { 'k8s.v1.cni.cncf.io/networks': 'vf, macvlan-a, vf' });
      const s = await m.setUpPod(p);
      const adds = (await recordedCalls(net.recordDir)).filter((c) => c.env.CNI_COMMAND === 'ADD');
      const got = adds.map((c) => [c.env.CNI_IFNAME, capability ? (c.stdin.runtimeConfig as Record<string, unknown>).deviceID : c.stdin.deviceID]);
      assert.deepEqual(got, [['net1', '0000:00:1f.1'], ['net3', '0000:00:1f.2']]);
      if (capability) assert.equal(adds[0]!.stdin.deviceID, undefined);
      assert.deepEqual(s.networkStatus.map((e) => e.interface), ['eth0', 'net1', 'net2', 'net3']);
      await m.tearDownPod(p);
      const dels = (await recordedCalls(net.recordDir)).filter((c) => c.env.CNI_COMMAND === 'DEL');
      assert.deepEqual(dels.map((c) => c.env.CNI_IFNAME), ['net3', 'net1'], 'reverse order, each with its device');
      assert.deepEqual(dels.map((c) => capability ? (c.stdin.runtimeConfig as Record<string, unknown>).deviceID : c.stdin.deviceID), ['0000:00:1f.2', '0000:00:1f.1']);
      await rm(net.recordDir, { recursive: true, force: true });
      await mkdir(net.recordDir);
    }
    assert.ok(server.calls.includes('Get mcnt/dev'));
    assert.deepEqual(await allAllocated(), []);
  });

  it('refuses when no device is left, when kubelet is not there; a pod without devices never asks; List when Get is missing', async (t) => {
    await writeDefinitions([macvlan(), recordNet(false)]);
    const m = await manager(t, new PodResourcesClient(server.socket));
    const p = await pod(t, 'dev', { 'k8s.v1.cni.cncf.io/networks': 'vf, vf, vf' });
    await assert.rejects(m.setUpPod(p), (err: unknown) => err instanceof InvalidArgument && /needs a device of resource "example\.com\/mcnt-vf", but the pod's 2 .* are all taken/.test(err.message));

    const gone = await manager(t, new PodResourcesClient(path.join(net.root, 'no-kubelet.sock')));
    await assert.rejects(gone.setUpPod({ ...p, annotations: { 'k8s.v1.cni.cncf.io/networks': 'vf' } }), (err: unknown) => err instanceof Unavailable && /pod-resources socket .*no-kubelet\.sock is not there/.test(err.message));
    const plain = { ...p, annotations: { 'k8s.v1.cni.cncf.io/networks': 'macvlan-a' } };
    await gone.setUpPod(plain);
    await gone.tearDownPod(plain);

    const old = await startPodResourcesServer([{ namespace: 'mcnt', name: 'dev', devices: { [RESOURCE]: ['0000:00:1f.7'] } }], { withGet: false });
    t.after(() => old.close());
    const viaList = await manager(t, new PodResourcesClient(old.socket));
    const one = { ...p, annotations: { 'k8s.v1.cni.cncf.io/networks': 'vf' } };
    await viaList.setUpPod(one);
    await viaList.tearDownPod(one);
    assert.deepEqual(old.calls, ['List']);
    const [add] = (await recordedCalls(net.recordDir)).filter((c) => c.env.CNI_COMMAND === 'ADD');
    assert.equal(add!.stdin.deviceID, '0000:00:1f.7');
    assert.deepEqual(await allAllocated(), []);
    assert.deepEqual(await cacheFiles(), []);
    await rm(net.recordDir, { recursive: true, force: true });
    await mkdir(net.recordDir);
  });

  it('GC DELs the attachments of gone sandboxes and tells a 1.1.0 secondary network which attachments are valid', async (t) => {
    await writeDefinitions([macvlan(), recordNet(false)]);
    const m = await manager(t, new PodResourcesClient(server.socket));
    const p = await pod(t, 'dev', { 'k8s.v1.cni.cncf.io/networks': 'macvlan-a, vf' });
    t.after(() => m.tearDownPod(p).catch(() => {}));
    await m.setUpPod(p);
    await m.gc([p.sandboxId]);
    const gcs = () => recordedCalls(net.recordDir).then((calls) => calls.filter((c) => c.env.CNI_COMMAND === 'GC').map((c) => c.stdin['cni.dev/valid-attachments']));
    assert.deepEqual(await gcs(), [[{ containerID: p.sandboxId, ifname: 'net2' }]]);
    assert.equal((await allAllocated()).length, 2);
    await m.gc([]);
    assert.deepEqual(await allAllocated(), [], 'the stale sandbox\'s attachments were DELeted through the cache');
    assert.deepEqual(await cacheFiles(), []);
    assert.deepEqual((await gcs())[1], []);
    const [del] = (await recordedCalls(net.recordDir)).filter((c) => c.env.CNI_COMMAND === 'DEL');
    assert.equal(del!.stdin.deviceID, '0000:00:1f.1');
    await rm(net.recordDir, { recursive: true, force: true });
    await mkdir(net.recordDir);
  });

  it('host-device moves the allocated link into the pod as net1 and back on teardown', async (t) => {
    await execa('ip', ['link', 'add', HOSTDEV, 'type', 'ifb']);
    await writeDefinitions([nad('hostdev', { cniVersion: '1.0.0', name: `mcnt-hdn${N}`, type: 'host-device' }, { resourceName: RESOURCE })]);
    const m = await manager(t, new PodResourcesClient(server.socket));
    const p = await pod(t, 'hd', { 'k8s.v1.cni.cncf.io/networks': 'hostdev' });
    t.after(() => m.tearDownPod(p).catch(() => {}));
    await m.setUpPod(p);
    assert.deepEqual(await links(p.netnsPath), ['eth0', 'lo', 'net1']);
    assert.equal((await execa('ip', ['link', 'show', HOSTDEV], { reject: false })).exitCode, 1, 'the link left the host');
    await m.tearDownPod(p);
    assert.deepEqual(await links(p.netnsPath), ['lo']);
    await execa('ip', ['link', 'show', HOSTDEV]);
  });
});
