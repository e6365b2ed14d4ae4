// Pod sandboxes end to end: the real daemon, real CNI plugins on a private bridge with no route out,
// the built-in pause under conmon and runc. Every test checks the host is left as it was.
import assert from 'node:assert/strict';
import { mkdir, readFile, readlink, rm, writeFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { execa } from 'execa';
import { makeTestNet, recordedCalls } from '../../support/cni-env.js';
import { makeDaemonDirs, removeDirs, TestDaemon } from '../../support/daemon.js';
import { assertNothingLeft, checkThenClean, hostSnapshot, networkFixtureObjects, type HostSnapshot } from '../../support/leaks.js';
import { podDaemon } from '../../support/pod-daemon.js';
import { containerConfig, PAUSE_IMAGE, podConfig } from '../../support/pods.js';

const PORTMAP = { type: 'portmap', capabilities: { portMappings: true } };

type Verbose = { pid: number; netnsPath: string; netnsLink: string; cniResults: unknown[] };

async function verbose(daemon: TestDaemon, id: string): Promise<Verbose> {
  const s = await daemon.client.runtime.call('PodSandboxStatus', { pod_sandbox_id: id, verbose: true });
  return JSON.parse(s.info.info);
}

async function inNetns(path: string, ...cmd: string[]): Promise<string> {
  return (await execa('nsenter', [`--net=${path}`, ...cmd])).stdout;
}

describe('pod sandboxes', () => {
  const pod = podDaemon(61, 'the sandbox tests', { network: (net) => net.writeBridgeConf({ extra: [PORTMAP] }) });

  it('runs a pod with an IP on the bridge, lo up and a pinned netns with a named link', async () => {
    const { pod_sandbox_id: id } = await pod.daemon.client.runtime.call('RunPodSandbox', { config: podConfig('web') });
    assert.match(id, /^[0-9a-f]{64}$/);
    const status = (await pod.daemon.client.runtime.call('PodSandboxStatus', { pod_sandbox_id: id })).status!;
    assert.equal(status.state, 'SANDBOX_READY');
    assert.match(status.network!.ip, /^10\.233\.61\.\d+$/);
    assert.equal(status.metadata!.name, 'web');
    assert.equal(status.linux!.namespaces!.options!.network, 'POD');
    const info = await verbose(pod.daemon, id);
    assert.ok(info.pid > 0, 'the pause pid is reported');
    assert.match(info.netnsPath, /^\/var\/run\/netns\/minicri-[0-9a-f]+$/);
    assert.equal(await readlink(info.netnsLink), info.netnsPath);
    assert.match(info.netnsLink, /\/web-[0-9a-f]+$/);
    const addrs = await inNetns(info.netnsPath, 'ip', '-o', 'addr');
    assert.match(addrs, /^\d+: lo +inet 127\.0\.0\.1\/8/m);
    assert.match(addrs, new RegExp(`eth0 +inet ${status.network!.ip.replaceAll('.', '\\.')}/24`));
    assert.match(await inNetns(info.netnsPath, 'ip', 'link', 'show', 'lo'), /state UNKNOWN|UP/);
    // The pause runs in the pod's network namespace.
    const { stdout: pauseNet } = await execa('nsenter', [`--net=${info.netnsPath}`, 'readlink', '/proc/self/ns/net']);
    assert.equal(await readlink(`/proc/${info.pid}/ns/net`), pauseNet);
    // Its root is the pause image's layer, shared read-only: no overlay is mounted for it.
    const rootMount = (await readFile(`/proc/${info.pid}/mountinfo`, 'utf8')).split('\n').find((l) => l.split(' ')[4] === '/');
    assert.match(rootMount!.split(' ')[5]!, /(^|,)ro(,|$)/);
    assert.ok(!(await readFile('/proc/self/mounts', 'utf8')).split('\n').some((l) => l.startsWith('overlay ') && l.includes(id)));
    assert.deepEqual(await pod.net.allocatedIps(), [status.network!.ip]);
    await pod.daemon.client.runtime.call('StopPodSandbox', { pod_sandbox_id: id });
    await pod.daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: id });
    assert.deepEqual(await pod.net.allocatedIps(), []);
  });

  it('turns a sandbox NOTREADY when its pause dies, and refuses new containers in it', async () => {
    const config = podConfig('pause-dies');
    const { pod_sandbox_id: id } = await pod.daemon.client.runtime.call('RunPodSandbox', { config });
    try {
      process.kill((await verbose(pod.daemon, id)).pid, 'SIGKILL');
      // Found by the list alone, as kubelet's relist finds it; the status then agrees.
      const deadline = Date.now() + 10_000;
      while ((await pod.daemon.client.runtime.call('ListPodSandbox', { filter: { id } })).items[0]!.state !== 'SANDBOX_NOTREADY') {
        assert.ok(Date.now() < deadline, 'the sandbox did not turn NOTREADY within 10 s');
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal((await pod.daemon.client.runtime.call('PodSandboxStatus', { pod_sandbox_id: id })).status!.state, 'SANDBOX_NOTREADY');
      await assert.rejects(pod.daemon.client.runtime.call('CreateContainer', { pod_sandbox_id: id, sandbox_config: config, config: containerConfig('late', PAUSE_IMAGE, ['/pause']) }),
        (err: grpc.ServiceError) => err.code === grpc.status.FAILED_PRECONDITION);
    } finally {
      await pod.daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: id });
    }
  });

  it('lets two pods reach each other over the bridge', async () => {
    const a = (await pod.daemon.client.runtime.call('RunPodSandbox', { config: podConfig('ping-a') })).pod_sandbox_id;
    const b = (await pod.daemon.client.runtime.call('RunPodSandbox', { config: podConfig('ping-b') })).pod_sandbox_id;
    try {
      const ipB = (await pod.daemon.client.runtime.call('PodSandboxStatus', { pod_sandbox_id: b })).status!.network!.ip;
      const out = await inNetns((await verbose(pod.daemon, a)).netnsPath, 'busybox', 'ping', '-c', '1', '-W', '3', ipB);
      assert.match(out, /1 packets received/);
    } finally {
      for (const id of [a, b]) await pod.daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: id });
    }
  });

  it('writes the DNS config into the pod resolv.conf and the hostname', async () => {
    const config = podConfig('dns', (c) => { c.dns_config = { servers: ['10.96.0.10'], searches: ['minicri-test.svc.cluster.local'], options: ['ndots:5'] }; });
    const { pod_sandbox_id: id } = await pod.daemon.client.runtime.call('RunPodSandbox', { config });
    try {
      const resolv = await readFile(`${pod.dirs.rootDir}/sandboxes/${id}/resolv.conf`, 'utf8');
      assert.equal(resolv, 'search minicri-test.svc.cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n');
      const pid = (await verbose(pod.daemon, id)).pid;
      assert.equal((await execa('nsenter', ['-t', String(pid), '-u', 'hostname'])).stdout, 'dns');
    } finally {
      await pod.daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: id });
    }
  });

  it('gives a host-network pod no netns and makes no CNI call', async () => {
    const config = podConfig('hostnet', (c) => { c.linux!.security_context!.namespace_options!.network = 'NODE'; });
    const { pod_sandbox_id: id } = await pod.daemon.client.runtime.call('RunPodSandbox', { config });
    try {
      const info = await verbose(pod.daemon, id);
      assert.equal(info.netnsPath, '');
      assert.deepEqual(info.cniResults, []);
      assert.deepEqual(await pod.net.allocatedIps(), []);
      assert.equal(await readlink(`/proc/${info.pid}/ns/net`), await readlink('/proc/self/ns/net'));
    } finally {
      await pod.daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: id });
    }
  });

  it('refuses a second sandbox with the same name, namespace, uid and attempt, naming the holder', async () => {
    const config = podConfig('twice');
    const { pod_sandbox_id: id } = await pod.daemon.client.runtime.call('RunPodSandbox', { config });
    try {
      await assert.rejects(pod.daemon.client.runtime.call('RunPodSandbox', { config }),
        (err: grpc.ServiceError) => err.code === grpc.status.ALREADY_EXISTS && err.details.includes(id));
    } finally {
      await pod.daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: id });
    }
  });

  it('refuses bad requests with INVALID_ARGUMENT and leaves nothing', async () => {
    const cases = [
      podConfig('', () => {}),
      podConfig('badport', (c) => { c.port_mappings = [{ protocol: 'TCP', container_port: 80, host_port: 99999 }]; }),
      podConfig('badsysctl', (c) => { c.linux!.sysctls = { 'kernel.panic': '1' }; }),
    ];
    for (const config of cases) {
      await assert.rejects(pod.daemon.client.runtime.call('RunPodSandbox', { config }), (err: grpc.ServiceError) => err.code === grpc.status.INVALID_ARGUMENT);
    }
    await assert.rejects(pod.daemon.client.runtime.call('RunPodSandbox', { config: podConfig('handler'), runtime_handler: 'kata' }),
      (err: grpc.ServiceError) => err.code === grpc.status.INVALID_ARGUMENT && /kata/.test(err.details));
    assert.deepEqual((await pod.daemon.client.runtime.call('ListPodSandbox', {})).items, []);
  });

  it('lists with filters and answers NOT_FOUND for unknown ids; stop and remove are idempotent', async () => {
    const a = (await pod.daemon.client.runtime.call('RunPodSandbox', { config: podConfig('list-a') })).pod_sandbox_id;
    const b = (await pod.daemon.client.runtime.call('RunPodSandbox', { config: podConfig('list-b') })).pod_sandbox_id;
    await pod.daemon.client.runtime.call('StopPodSandbox', { pod_sandbox_id: b });
    await pod.daemon.client.runtime.call('StopPodSandbox', { pod_sandbox_id: b });
    const list = (filter: object) => pod.daemon.client.runtime.call('ListPodSandbox', { filter }).then((r) => r.items.map((i) => i.id).sort());
    assert.deepEqual(await list({}), [a, b].sort());
    assert.deepEqual(await list({ state: { state: 'SANDBOX_READY' } }), [a]);
    assert.deepEqual(await list({ state: { state: 'SANDBOX_NOTREADY' } }), [b]);
    assert.deepEqual(await list({ label_selector: { app: 'list-b' } }), [b]);
    assert.deepEqual(await list({ id: a.slice(0, 10) }), [a]);
    assert.equal((await pod.daemon.client.runtime.call('PodSandboxStatus', { pod_sandbox_id: a.slice(0, 12) })).status!.id, a);
    await assert.rejects(pod.daemon.client.runtime.call('PodSandboxStatus', { pod_sandbox_id: 'f'.repeat(64) }), (err: grpc.ServiceError) => err.code === grpc.status.NOT_FOUND);
    for (const id of [a, b, a, b]) await pod.daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: id });
    await pod.daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: 'f'.repeat(64) });
    assert.deepEqual(await list({}), []);
  });

  it('runs and removes 20 sandboxes in parallel and leaves nothing behind', async () => {
    const ids = await Promise.all(Array.from({ length: 20 }, (_, i) =>
      pod.daemon.client.runtime.call('RunPodSandbox', { config: podConfig(`par${i}`) }).then((r) => r.pod_sandbox_id)));
    const ips = new Set(await Promise.all(ids.map(async (id) => (await pod.daemon.client.runtime.call('PodSandboxStatus', { pod_sandbox_id: id })).status!.network!.ip)));
    assert.equal(ips.size, 20, 'every pod has its own IP');
    await Promise.all(ids.map((id) => pod.daemon.client.runtime.call('StopPodSandbox', { pod_sandbox_id: id })));
    await Promise.all(ids.map((id) => pod.daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: id })));
    assert.deepEqual(await pod.net.allocatedIps(), []);
    assert.deepEqual((await pod.daemon.client.runtime.call('ListPodSandbox', {})).items, []);
  });

  it('releases the IP through the CNI cache when stopped after a restart with the config gone', async () => {
    const { pod_sandbox_id: id } = await pod.daemon.client.runtime.call('RunPodSandbox', { config: podConfig('restart') });
    assert.equal((await pod.net.allocatedIps()).length, 1);
    assert.equal(await pod.daemon.stop(), 0);
    await rm(pod.net.confDir, { recursive: true, force: true });
    pod.daemon = await TestDaemon.start(pod.dirs);
    assert.equal((await pod.daemon.client.runtime.call('PodSandboxStatus', { pod_sandbox_id: id })).status!.state, 'SANDBOX_READY');
    await pod.daemon.client.runtime.call('StopPodSandbox', { pod_sandbox_id: id });
    assert.deepEqual(await pod.net.allocatedIps(), []);
    await pod.daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: id });
    await pod.net.writeBridgeConf({ extra: [PORTMAP] });
  });
});

describe('pod network failures and readiness', () => {
  let snapshot: HostSnapshot;
  before(async () => { snapshot = await hostSnapshot(); });
  after(() => assertNothingLeft(snapshot, 'the network failure tests'));

  it('undoes everything when a plugin fails ADD: no netns, no IP, no pause, no record', async () => {
    const start = await hostSnapshot();
    const net = await makeTestNet(62);
    await net.writeBridgeConf({ extra: [{ type: 'mcnt-fail' }] });
    const dirs = makeDaemonDirs('', net);
    const daemon = await TestDaemon.start(dirs);
    try {
      const before = await hostSnapshot();
      let first: grpc.ServiceError | undefined;
      await assert.rejects(daemon.client.runtime.call('RunPodSandbox', { config: podConfig('failing') }),
        (err: grpc.ServiceError) => { first = err; return /mcnt-fail/.test(err.details); });
      assert.deepEqual(await net.allocatedIps(), []);
      // The bridge the first ADD made is the network's own (removed with it).
      await assertNothingLeft(before, 'a failed RunPodSandbox', networkFixtureObjects(net.bridge));
      assert.deepEqual((await daemon.client.runtime.call('ListPodSandbox', {})).items, []);
      // The name is free again: a retry is refused by the plugin again, as the first try was, not by a stale reservation.
      await assert.rejects(daemon.client.runtime.call('RunPodSandbox', { config: podConfig('failing') }),
        (err: grpc.ServiceError) => err.code === first!.code && /mcnt-fail/.test(err.details));
      await assertNothingLeft(before, 'a retried failed RunPodSandbox', networkFixtureObjects(net.bridge));
    } finally {
      await daemon.stop();
      await checkThenClean(start, 'the failed ADD test', networkFixtureObjects(net.bridge), async () => { await net.cleanup(); removeDirs(dirs); });
    }
  });

  it('reports NetworkReady=false until a conf file appears, then true without a restart', async () => {
    const start = await hostSnapshot();
    const net = await makeTestNet(63);
    const dirs = makeDaemonDirs('', net);
    const daemon = await TestDaemon.start(dirs);
    const networkReady = async () => (await daemon.client.runtime.call('Status', {})).status!.conditions.find((c) => c.type === 'NetworkReady')!;
    try {
      const notReady = await networkReady();
      assert.equal(notReady.status, false);
      assert.equal(notReady.reason, 'NetworkPluginNotReady');
      assert.ok(notReady.message.length > 0);
      await net.writeBridgeConf();
      const deadline = Date.now() + 10_000;
      while (!(await networkReady()).status) {
        assert.ok(Date.now() < deadline, 'NetworkReady did not turn true within 10 s');
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      await daemon.stop();
      await checkThenClean(start, `the ${net.networkName} test`, networkFixtureObjects(net.bridge), async () => { await net.cleanup(); removeDirs(dirs); });
    }
  });

  it('sends STATUS to a CNI 1.1.0 plugin and GC with the valid attachments at start', async () => {
    const start = await hostSnapshot();
    const net = await makeTestNet(64);
    const conf = { cniVersion: '1.1.0', name: 'mcnt-rec64', plugins: [{ type: 'mcnt-record', recordDir: net.recordDir }] };
    await mkdir(net.confDir, { recursive: true });
    await writeFile(`${net.confDir}/10-record.conflist`, JSON.stringify(conf));
    const dirs = makeDaemonDirs('', net);
    let daemon = await TestDaemon.start(dirs);
    try {
      const { pod_sandbox_id: id } = await daemon.client.runtime.call('RunPodSandbox', { config: podConfig('recorded') });
      await daemon.client.runtime.call('Status', {});
      assert.ok((await recordedCalls(net.recordDir)).some((c) => c.env.CNI_COMMAND === 'STATUS'), 'STATUS was sent');
      await daemon.stop();
      daemon = await TestDaemon.start(dirs);
      const gc = (await recordedCalls(net.recordDir)).filter((c) => c.env.CNI_COMMAND === 'GC');
      assert.ok(gc.length > 0, 'GC was sent at start');
      const valid = gc.at(-1)!.stdin['cni.dev/valid-attachments'] as { containerID: string }[];
      assert.ok(valid.some((a) => a.containerID === id), 'the live sandbox is a valid attachment');
      await daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: id });
    } finally {
      await daemon.stop();
      await checkThenClean(start, `the ${net.networkName} test`, networkFixtureObjects(net.bridge), async () => { await net.cleanup(); removeDirs(dirs); });
    }
  });
});
