// Secondary networks through the daemon, as kubelet drives it: RunPodSandbox with the multus annotation,
// what PodSandboxStatus reports, a restart, and StopPodSandbox releasing every address of every network.
// macvlan runs on an ifb link the test makes (a standalone link, as a dummy one would be); the
// device-backed network is the recording test plugin with devices from a test pod-resources server.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { execa } from 'execa';
import { recordedCalls } from '../../support/cni-env.js';
import { makeDaemonDirs, removeDirs, TestDaemon, type DaemonDirs } from '../../support/daemon.js';
import { testNetwork } from '../../support/pod-daemon.js';
import { startPodResourcesServer, type PodResourcesServer } from '../../support/pod-resources-server.js';
import { podConfig } from '../../support/pods.js';

const N = 52;
const MASTER = `mcnt-dm${N}`;
const MACVLAN_NET = `mcnt-mv${N}`;
const RESOURCE = 'example.com/mcnt-vf';
const NAMESPACE = 'minicri-test';

describe('secondary networks through the daemon', () => {
  let server: PodResourcesServer;
  let dirs: DaemonDirs;
  let daemon: TestDaemon;
  after(async () => { await daemon?.stop(); await server?.close(); });
  const fixture = testNetwork(N, 'the daemon secondary network test', {
    network: async (net) => {
      await net.writeBridgeConf();
      await execa('ip', ['link', 'add', MASTER, 'type', 'ifb']);
      await execa('ip', ['link', 'set', MASTER, 'up']);
      const netsDir = path.join(net.root, 'networks.d');
      await mkdir(netsDir);
      const nad = (name: string, config: object, annotations: Record<string, string> = {}) =>
        `---\napiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: ${name}\n  namespace: ${NAMESPACE}\n  annotations: ${JSON.stringify(annotations)}\nspec:\n  config: '${JSON.stringify(config)}'\n`;
      await writeFile(path.join(netsDir, 'nets.yaml'), [
        nad('macvlan-a', { cniVersion: '1.0.0', name: MACVLAN_NET, type: 'macvlan', master: MASTER, mode: 'bridge', ipam: { type: 'host-local', ranges: [[{ subnet: `10.234.${N}.0/24` }]], dataDir: net.dataDir } }),
        nad('vf', { cniVersion: '1.1.0', name: `mcnt-vf${N}`, type: 'mcnt-record', recordDir: net.recordDir }, { 'k8s.v1.cni.cncf.io/resourceName': RESOURCE }),
      ].join(''));
    },
    links: [`ifb ${MASTER}`],
    cleanup: async () => {
      await execa('ip', ['link', 'del', MASTER], { reject: false });
      if (dirs) removeDirs(dirs);
    },
  });

  before(async () => {
    const net = fixture.net;
    server = await startPodResourcesServer([{ namespace: NAMESPACE, name: 'multi', devices: { [RESOURCE]: ['0000:00:1f.3'] } }]);
    dirs = makeDaemonDirs('', { ...net, networksDir: path.join(net.root, 'networks.d'), podResourcesSocket: server.socket });
    daemon = await TestDaemon.start(dirs);
  });

  const allocated = async () => {
    const net = fixture.net;
    const macvlan = await readdir(path.join(net.dataDir, MACVLAN_NET)).catch(() => [] as string[]);
    return [...(await net.allocatedIps()), ...macvlan.filter((f) => /^\d+\.\d+\.\d+\.\d+$/.test(f))];
  };

  it('attaches the networks, reports them as multus does, and releases them all on stop after a restart', async () => {
    const config = podConfig('multi', (c) => { c.annotations!['k8s.v1.cni.cncf.io/networks'] = 'macvlan-a, vf'; });
    const { pod_sandbox_id: id } = await daemon.client.runtime.call('RunPodSandbox', { config });
    const res = await daemon.client.runtime.call('PodSandboxStatus', { pod_sandbox_id: id, verbose: true });
    const info = JSON.parse(res.info.info!) as { networkStatus: { name: string; interface: string; ips?: string[]; default?: boolean }[]; netnsPath: string };
    assert.match(res.status!.network!.ip, new RegExp(`^10\\.233\\.${N}\\.`), 'the pod IP stays the default network\'s');
    assert.deepEqual(res.status!.network!.additional_ips, []);
    assert.deepEqual(info.networkStatus.map((e) => [e.name, e.interface, e.default ?? false]), [[fixture.net.networkName, 'eth0', true], [`${NAMESPACE}/macvlan-a`, 'net1', false], [`${NAMESPACE}/vf`, 'net2', false]]);
    assert.deepEqual(info.networkStatus[0]!.ips, [res.status!.network!.ip]);
    assert.match(info.networkStatus[1]!.ips![0]!, new RegExp(`^10\\.234\\.${N}\\.`));
    assert.equal((await allocated()).length, 2);
    // The pod's stats list the secondary interface beside eth0 (the recording plugin makes no interface of its own).
    const net = (await daemon.client.runtime.call('PodSandboxStats', { pod_sandbox_id: id })).stats!.linux!.network!;
    assert.equal(net.default_interface!.name, 'eth0');
    assert.deepEqual(net.interfaces.map((i) => i.name), ['net1']);
    const [add] = (await recordedCalls(fixture.net.recordDir)).filter((c) => c.env.CNI_COMMAND === 'ADD');
    assert.equal(add!.stdin.deviceID, '0000:00:1f.3');

    await daemon.stop();
    daemon = await TestDaemon.start(dirs);
    await daemon.client.runtime.call('StopPodSandbox', { pod_sandbox_id: id });
    assert.deepEqual(await allocated(), []);
    const dels = (await recordedCalls(fixture.net.recordDir)).filter((c) => c.env.CNI_COMMAND === 'DEL');
    assert.deepEqual(dels.map((c) => [c.env.CNI_IFNAME, c.stdin.deviceID]), [['net2', '0000:00:1f.3']]);
    await daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: id });
  });

  it('refuses a bad request with INVALID_ARGUMENT, a missing kubelet with UNAVAILABLE, leaving nothing', async () => {
    const cases: [string, number, RegExp][] = [
      ['[{"name": "macvlan-a"', grpc.status.INVALID_ARGUMENT, /is not valid JSON/],
      ['macvlan-a, unknown-net', grpc.status.INVALID_ARGUMENT, /network minicri-test\/unknown-net is not defined/],
      ['macvlan-a@data, vf@data', grpc.status.INVALID_ARGUMENT, /interface data, which network minicri-test\/macvlan-a already uses/],
      ['NotDNS/macvlan-a', grpc.status.INVALID_ARGUMENT, /namespace "NotDNS" is not a valid namespace name/],
      ['vf, vf', grpc.status.INVALID_ARGUMENT, /are all taken by its other attachments/],
    ];
    for (const [annotation, code, re] of cases) {
      const config = podConfig('multi', (c) => { c.annotations!['k8s.v1.cni.cncf.io/networks'] = annotation; });
      await assert.rejects(daemon.client.runtime.call('RunPodSandbox', { config }), (err: grpc.ServiceError) => err.code === code && re.test(err.details), annotation);
    }
    await server.close();
    const config = podConfig('multi', (c) => { c.annotations!['k8s.v1.cni.cncf.io/networks'] = 'vf'; });
    await assert.rejects(daemon.client.runtime.call('RunPodSandbox', { config }), (err: grpc.ServiceError) => err.code === grpc.status.UNAVAILABLE && /pod-resources/.test(err.details));
    assert.deepEqual((await daemon.client.runtime.call('ListPodSandbox', {})).items, []);
    assert.deepEqual(await allocated(), []);
  });
});
