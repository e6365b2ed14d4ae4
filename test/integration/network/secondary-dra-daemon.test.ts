// DRA-backed secondary networks through the daemon, as kubelet drives it: RunPodSandbox takes the pod's
// claim from a test pod-resources server and the device from a CDI spec dir the test writes as a DRA driver
// would; PodSandboxStatus (verbose) and the pod's status file report the device; a restart; StopPodSandbox
// gives the link back; a DEL that fails is retried by the daemon before the namespace goes.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { execa } from 'execa';
import type { DraAttachmentStatus, PodDeviceStatusFile } from '../../../cni/dra.js';
import { makeDaemonDirs, removeDirs, TestDaemon, type DaemonDirs } from '../../support/daemon.js';
import { testNetwork } from '../../support/pod-daemon.js';
import { startPodResourcesServer, type PodResourcesServer } from '../../support/pod-resources-server.js';
import { containerConfig, PAUSE_IMAGE, podConfig } from '../../support/pods.js';
import { waitFor } from '../../support/wait.js';

const N = 58;
const LINK = `mcnt-dl${N}`;
const DRIVER = 'net.example.com';
const KIND = 'net.example.com/vf';
const NAMESPACE = 'minicri-test';

describe('DRA-backed secondary networks through the daemon', () => {
  let server: PodResourcesServer;
  let dirs: DaemonDirs;
  let daemon: TestDaemon;
  after(async () => { await daemon?.stop(); await server?.close(); });
  const fixture = testNetwork(N, 'the daemon DRA network test', {
    network: async (net) => {
      await net.writeBridgeConf();
      await execa('ip', ['link', 'add', LINK, 'type', 'ifb']);
      const netsDir = path.join(net.root, 'networks.d');
      await mkdir(netsDir);
      const nad = (name: string, config: object) =>
        `---\napiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: ${name}\n  namespace: ${NAMESPACE}\n` +
        `  annotations: {"dra.minicri.io/driver": "${DRIVER}", "dra.minicri.io/claim": "${name}"}\nspec:\n  config: '${JSON.stringify(config)}'\n`;
      await writeFile(path.join(netsDir, 'nets.yaml'), [
        nad('hostdev', { cniVersion: '1.0.0', name: `mcnt-hd${N}`, type: 'host-device' }),
        nad('flaky', { cniVersion: '1.0.0', name: `mcnt-fl${N}`, type: 'mcnt-flaky', addResult: true, delFailures: 2, stateDir: net.recordDir }),
      ].join(''));
      const cdiDir = path.join(net.root, 'cdi');
      await mkdir(cdiDir);
      await writeFile(path.join(cdiDir, 'net.yaml'), [
        'cdiVersion: "1.1.0"', `kind: ${KIND}`, 'devices:',
        `  - {name: link, containerEdits: {env: [VF_NAME=link], netDevices: [{hostInterfaceName: ${LINK}, name: net1}]}}`,
        `  - {name: stranded, containerEdits: {netDevices: [{hostInterfaceName: ${net.bridge}, name: net9}]}}`,
        '  - {name: vf-7, annotations: {"dra.minicri.io/pci-address": "0000:5e:00.7"}, containerEdits: {}}', '',
      ].join('\n'));
    },
    links: [`ifb ${LINK}`],
    cleanup: async () => {
      await execa('ip', ['link', 'del', LINK], { reject: false });
      if (dirs) removeDirs(dirs);
    },
  });

  before(async () => {
    const net = fixture.net;
    const device = (name: string) => ({ driver: DRIVER, pool: 'node-1', device: name, cdiDevices: [`${KIND}=${name}`] });
    server = await startPodResourcesServer([
      { namespace: NAMESPACE, name: 'dra', devices: {}, claims: [{ name: 'hostdev', devices: [device('link')] }] },
      { namespace: NAMESPACE, name: 'flaky', devices: {}, claims: [{ name: 'flaky', devices: [device('vf-7')] }] },
    ]);
    dirs = makeDaemonDirs(`[cdi]\nspec_dirs = ["${path.join(net.root, 'cdi')}"]`, { ...net, networksDir: path.join(net.root, 'networks.d'), podResourcesSocket: server.socket });
    daemon = await TestDaemon.start(dirs);
  });

  const onHost = async () => (await execa('ip', ['link', 'show', LINK], { reject: false })).exitCode === 0;

  it('moves the claim\'s device in as net1, reports it in verbose status and the pod\'s status file, and gives it back on stop after a restart', async () => {
    const config = podConfig('dra', (c) => { c.annotations!['k8s.v1.cni.cncf.io/networks'] = 'hostdev'; });
    const { pod_sandbox_id: id } = await daemon.client.runtime.call('RunPodSandbox', { config });
    assert.equal(await onHost(), false, 'the link left the host');
    const res = await daemon.client.runtime.call('PodSandboxStatus', { pod_sandbox_id: id, verbose: true });
    const info = JSON.parse(res.info.info!) as { deviceStatus: DraAttachmentStatus[]; networkStatus: { name: string; interface: string; mac?: string }[] };
    const [entry] = info.deviceStatus;
    assert.deepEqual([entry?.claim, entry?.status.driver, entry?.status.pool, entry?.status.device, entry?.status.networkData.interfaceName],
      [{ namespace: NAMESPACE, name: 'hostdev' }, DRIVER, 'node-1', 'link', 'net1']);
    assert.match(entry!.status.networkData.hardwareAddress ?? '', /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);
    assert.deepEqual(info.networkStatus[1], entry!.status.data, 'the attachment\'s network-status entry is the device status\'s data');
    const file = path.join(dirs.stateDir, 'sandboxes', id, 'network-devices.json');
    const written = JSON.parse(await readFile(file, 'utf8')) as PodDeviceStatusFile;
    assert.deepEqual(written.devices, info.deviceStatus);
    assert.equal(written.pod.name, 'dra');

    // kubelet passes the claim's CDI device to the container too: its other edits apply, its netDevices never
    // (the plugin moved the link already); a netDevices edit whose interface is still on the host is refused.
    const container = (cdi: string) => ({ ...containerConfig('app', PAUSE_IMAGE, ['/pause']), CDI_devices: [{ name: `${KIND}=${cdi}` }] });
    const { container_id: cid } = await daemon.client.runtime.call('CreateContainer', { pod_sandbox_id: id, sandbox_config: config, config: container('link') });
    const spec = JSON.parse(await readFile(path.join(dirs.rootDir, 'containers', cid, 'config.json'), 'utf8')) as { process: { env: string[] }; linux: Record<string, unknown> };
    assert.ok(spec.process.env.includes('VF_NAME=link'));
    assert.equal(spec.linux.netDevices, undefined);
    await assert.rejects(daemon.client.runtime.call('CreateContainer', { pod_sandbox_id: id, sandbox_config: config, config: container('stranded') }),
      (err: grpc.ServiceError) => err.code === grpc.status.INVALID_ARGUMENT && /moves host interface mcnt-br58 into the container \(netDevices\)/.test(err.details));
    await daemon.client.runtime.call('RemoveContainer', { container_id: cid });

    await daemon.stop();
    daemon = await TestDaemon.start(dirs);
    await daemon.client.runtime.call('StopPodSandbox', { pod_sandbox_id: id });
    assert.equal(await onHost(), true, 'the link is back on the host');
    await assert.rejects(stat(file), { code: 'ENOENT' });
    await daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: id });
  });

  it('retries a failing DEL of a DRA-backed attachment from the pending queue until it succeeds, before the namespace goes', async () => {
    const client = daemon.client;
    const pending = async () => JSON.parse((await client.runtime.call('Status', { verbose: true })).info.pendingTeardowns!) as { sandboxId: string; lastError: string }[];
    const config = podConfig('flaky', (c) => { c.annotations!['k8s.v1.cni.cncf.io/networks'] = 'flaky'; });
    const { pod_sandbox_id: id } = await client.runtime.call('RunPodSandbox', { config });
    const netns = (JSON.parse((await client.runtime.call('PodSandboxStatus', { pod_sandbox_id: id, verbose: true })).info.info!) as { netnsPath: string }).netnsPath;
    await assert.rejects(client.runtime.call('StopPodSandbox', { pod_sandbox_id: id }), /mcnt-flaky DEL failure 1/);
    const [deferred] = await pending();
    assert.equal(deferred?.sandboxId, id);
    await stat(netns);
    await waitFor(async () => (await pending()).length === 0, 20_000, 'the deferred DEL to succeed');
    const dels = Number(await readFile(path.join(fixture.net.recordDir, `del.${id}`), 'utf8'));
    assert.equal(dels, 3, 'two failed DELs, then the retry that succeeded');
    await client.runtime.call('StopPodSandbox', { pod_sandbox_id: id });
    await client.runtime.call('RemovePodSandbox', { pod_sandbox_id: id });
    assert.deepEqual((await client.runtime.call('ListPodSandbox', {})).items, []);
  });
});
