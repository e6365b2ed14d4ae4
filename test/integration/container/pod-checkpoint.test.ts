// CheckpointPod and RestorePod through two real daemons with the real CRIU (test/support/criu.ts): a pod of two
// counters sharing a host directory (the stand-in for an emptyDir, which is kubelet's and provided again) and on a
// secondary network whose definition declares the `ips` capability, checkpointed in one daemon, removed, and
// restored in a second one (its own root and state dirs, another default subnet: the stand-in for another node):
// both counters count on, the secondary address is the same, the default one is the new node's. Then the refusals
// (each leaves nothing), and a daemon killed mid-checkpoint (containers frozen) and mid-restore: after its restart
// nothing is left and every container runs thawed.
import assert from 'node:assert/strict';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { execa } from 'execa';
import type { ContainerConfig } from '../../../gen/runtime/v1/ContainerConfig.js';
import type { PodSandboxConfig } from '../../../gen/runtime/v1/PodSandboxConfig.js';
import { makeTestNet, type TestNet } from '../../support/cni-env.js';
import { describeCriu, testCriu, type TestCriu } from '../../support/criu.js';
import { makeDaemonDirs, removeDirs, TestDaemon, type DaemonDirs } from '../../support/daemon.js';
import { containerConfig, podConfig } from '../../support/pods.js';
import { ContainerEnv, sleep, type Pod } from './env.js';

const A = 161;
const B = 162;
/** The secondary network: its own bridge, no gateway, no route out, a private subnet; host-local per node. */
const SEC_BRIDGE = `mcnt-sb${A}`;
const SEC_SUBNET = `10.236.${A}.0/24`;
const NETWORKS = 'k8s.v1.cni.cncf.io/networks';
/** A server logging what it receives, and a client sending a count on ONE connection that exits when it breaks (no reconnect). */
const ncServer = ['sh', '-c', 'sleep 1000000 | nc -l -p 7000'];
const ncClient = (to: string) => ['sh', '-c', `sleep 1; i=0; while :; do i=$((i+1)); echo $i; sleep 0.1; done | nc ${to} 7000`];
const counter = (name: string) => ['sh', '-c', `i=0; while :; do i=$((i+1)); echo $i; echo $i > /data/${name}; sleep 0.1; done`];

function grpcCode(code: grpc.status, details?: RegExp) {
  return (err: grpc.ServiceError) => {
    assert.equal(err.code, code, `expected ${grpc.status[code]}, got ${grpc.status[err.code]}: ${err.details}`);
    if (details) assert.match(err.details, details);
    return true;
  };
}

/** The numbers a k8s-file log holds, in order. */
function logged(text: string): number[] {
  return text.split('\n').filter((l) => l.includes(' stdout F ')).map((l) => Number(l.slice(l.indexOf(' stdout F ') + 10)));
}

/** Every file under `dir` with its size and mtime: a checkpoint directory must come out of a restore unchanged. */
async function snapshot(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const name of (await readdir(dir, { recursive: true })).sort()) {
    const st = await stat(join(dir, name));
    out.push(`${name} ${st.size} ${st.mtimeMs}`);
  }
  return out;
}

/** A NetworkAttachmentDefinition of the secondary network, its host-local state in `dataDir` (each node has its own). */
async function writeSecondaryNetwork(networksDir: string, dataDir: string): Promise<void> {
  await mkdir(networksDir, { recursive: true });
  const config = {
    cniVersion: '1.0.0', name: `mcnt-sec${A}`,
    plugins: [{
      type: 'bridge', bridge: SEC_BRIDGE, isGateway: false, ipMasq: false, capabilities: { ips: true },
      ipam: { type: 'host-local', ranges: [[{ subnet: SEC_SUBNET }]], dataDir },
    }],
  };
  await writeFile(join(networksDir, 'sec.yaml'), `---\napiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\n`
    + `metadata:\n  name: sec\n  namespace: minicri-test\nspec:\n  config: '${JSON.stringify(config)}'\n`);
}

describe('CheckpointPod and RestorePod', () => {
  let criu: TestCriu;
  let env: ContainerEnv;
  let dir: string;
  let archives: string;
  let net2: TestNet;
  let dirs2: DaemonDirs;
  let second: TestDaemon;
  /** The checkpoint the migration test writes; the refusals restore from it too. */
  let checkpointDir: string;
  const toml = () => `criu_path = "${criu.path}"\n[restore]\nenabled = true\narchive_dir = "${archives}"\n`;

  before(async () => {
    criu = await testCriu();
    dir = await mkdtemp(join(tmpdir(), 'minicri-podckpt-'));
    archives = join(dir, 'checkpoints');
    await mkdir(archives);
    env = await ContainerEnv.start(A, toml());
    // The definitions are read at start: written, then the daemon restarted.
    await env.restartDaemon(() => writeSecondaryNetwork(join(env.dirs.base, 'networks.d'), join(env.net.root, 'sec-ipam')));
    net2 = await makeTestNet(B);
    await net2.writeBridgeConf();
    const networksDir = join(net2.root, 'networks.d');
    await writeSecondaryNetwork(networksDir, join(net2.root, 'sec-ipam'));
    dirs2 = makeDaemonDirs(toml(), { ...net2, networksDir });
    second = await TestDaemon.start(dirs2);
  });
  after(async () => {
    try {
      if (second) {
        try {
          for (const p of (await second.client.runtime.call('ListPodSandbox', {})).items) {
            await second.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: p.id });
          }
          assert.deepEqual((await readdir(join(dirs2.rootDir, 'containers')).catch(() => [])), [], 'the second daemon keeps no container dir');
        } finally {
          await second.stop();
          await net2?.cleanup();
          removeDirs(dirs2);
        }
      }
      for (const p of (await env.rt.runtime.call('ListPodSandbox', {})).items) await env.rt.runtime.call('RemovePodSandbox', { pod_sandbox_id: p.id });
      // The bridge plugin leaves its bridge; the secondary network's is the test's to remove.
      await execa('ip', ['link', 'del', SEC_BRIDGE], { reject: false });
    } finally {
      try {
        await env?.stop();
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    }
  });

  /** False (the test skipped, loudly) only where no CRIU was asked for and the system's fails `criu check`. */
  function criuWorks(t: TestContext): boolean {
    t.diagnostic(describeCriu(criu));
    if (criu.works) return true;
    t.skip(`NO CRIU CAN WORK ON THIS NODE (${describeCriu(criu)}): pod checkpoints untested; build one with ../shared/criu/build.sh`);
    return false;
  }

  const secondaryOf = (ips?: string[]) => (c: PodSandboxConfig) => {
    c.annotations![NETWORKS] = JSON.stringify([{ name: 'sec', interface: 'net1', ...(ips ? { ips } : {}) }]);
  };
  const withData = (data: string) => (c: ContainerConfig) => { c.mounts = [{ container_path: '/data', host_path: data }]; };
  async function networkStatus(client: TestDaemon['client'], id: string): Promise<{ ip: string; status: { name: string; interface: string; ips?: string[] }[] }> {
    const res = await client.runtime.call('PodSandboxStatus', { pod_sandbox_id: id, verbose: true });
    return { ip: res.status!.network!.ip, status: (JSON.parse(res.info.info!) as { networkStatus: [] }).networkStatus };
  }
  async function countedIn(client: TestDaemon['client'], id: string): Promise<number[]> {
    const s = (await client.runtime.call('ContainerStatus', { container_id: id })).status!;
    return logged(await readFile(s.log_path, 'utf8').catch(() => ''));
  }
  async function counting(client: TestDaemon['client'], id: string, atLeast: number): Promise<number[]> {
    let seen: number[] = [];
    for (const deadline = Date.now() + 10_000; (seen = await countedIn(client, id)).length < atLeast;) {
      assert.ok(Date.now() < deadline, `container ${id} counts (${seen.length} lines)`);
      await sleep(100);
    }
    return seen;
  }
  /** A pod of two counters writing to `data`, on the secondary network; its containers' ids. */
  async function counterPod(t: TestContext, name: string, data: string): Promise<{ pod: Pod; ids: string[] }> {
    const pod = await env.runPod(t, name, secondaryOf());
    const ids = [await env.run(pod, 'one', counter('one'), withData(data)), await env.run(pod, 'two', counter('two'), withData(data))];
    for (const id of ids) await counting(env.rt, id, 5);
    return { pod, ids };
  }
  /**
   * A pod of an nc server and a client counting to it at `to(pod)`, checkpointed into archives/<name> once the
   * server has `atLeast` lines; with the client's command, for the restore.
   */
  async function checkpointedNcPair(t: TestContext, name: string, to: (pod: Pod) => Promise<string>, atLeast: number) {
    const pod = await env.runPod(t, name);
    const client = ncClient(await to(pod));
    const ids = [await env.run(pod, 'server', ncServer), await env.run(pod, 'client', client)];
    await counting(env.rt, ids[0]!, atLeast);
    const out = join(archives, name);
    await mkdir(out);
    await checkpointPod(env.rt, { pod_sandbox_id: pod.id, output_path: out, container_ids: ids });
    return { pod, ids, out, client };
  }
  /** Such a pair restored by the second daemon, as pod `<name>2`. */
  const restoreNcPair = (digest: string, name: string, out: string, client: string[]) => restorePod({
    checkpoint_path: out, config: podConfig(`${name}2`, (c) => { c.log_directory = join(dirs2.base, 'logs', `${name}2`); }),
    container_configs: [containerConfig('server', digest, ncServer), containerConfig('client', digest, client)],
  });
  /** runc's own word on a container (its state files do not tell paused from running). */
  const runcStatus = async (id: string) => (JSON.parse((await execa('runc', ['--root', env.runcRoot, 'state', id])).stdout) as { status: string }).status;
  const checkpointPod = (client: TestDaemon['client'], r: { pod_sandbox_id: string; output_path: string; container_ids: string[]; options?: Record<string, string> }, timeoutMs = 60_000) =>
    client.runtime.call('CheckpointPod', r, { timeoutMs });
  const restoreConfigs = (digest: string, data: string) =>
    ['one', 'two'].map((n) => containerConfig(n, digest, counter(n), withData(data)));
  const restorePod = (r: { checkpoint_path: string; config: PodSandboxConfig; container_configs: ContainerConfig[]; runtime_handler?: string; options?: Record<string, string> }, timeoutMs = 60_000) =>
    second.client.runtime.call('RestorePod', r, { timeoutMs });
  const targetConfig = (name: string) => podConfig(name, (c) => { c.log_directory = join(dirs2.base, 'logs', name); secondaryOf()(c); });
  async function baseDigest(): Promise<string> {
    const digest = (await env.rt.image.call('ImageStatus', { image: { image: env.images.root } })).image!.repo_digests[0]!;
    await second.client.image.call('PullImage', { image: { image: digest } });
    return digest;
  }

  it('a two-container pod on a secondary network migrates to a second daemon: both count on, the secondary address is kept', async (t) => {
    if (!criuWorks(t)) return;
    const digest = await baseDigest();
    // A pod holding the secondary network's first address here, so the one checkpointed is not the first a new node gives.
    const filler = await env.runPod(t, 'pcfiller', secondaryOf());
    const data = join(dir, 'data-a');
    await mkdir(data);
    const { pod, ids } = await counterPod(t, 'pcsource', data);
    const source = await networkStatus(env.rt, pod.id);
    const sourceSec = source.status.find((e) => e.interface === 'net1')!.ips!;
    assert.equal(source.status.find((e) => e.interface === 'net1')!.name, 'minicri-test/sec');
    await env.rt.runtime.call('RemovePodSandbox', { pod_sandbox_id: filler.id });

    checkpointDir = join(archives, 'pod');
    await mkdir(checkpointDir);
    await checkpointPod(env.rt, { pod_sandbox_id: pod.id, output_path: checkpointDir, container_ids: ids });
    const manifest = JSON.parse(await readFile(join(checkpointDir, 'pod.json'), 'utf8')) as {
      pod: { name: string }; containers: { name: string; archive: string }[]; networks: { network: string; interface: string; cidrs: string[] }[];
    };
    assert.equal(manifest.pod.name, 'pcsource');
    assert.deepEqual(manifest.containers.map((c) => c.name), ['one', 'two']);
    assert.deepEqual((await readdir(join(checkpointDir, 'containers'))).sort(), ids.map((id) => `${id}.tar`).sort());
    for (const c of manifest.containers) {
      const members = (await execa('tar', ['-tf', join(checkpointDir, c.archive)])).stdout.split('\n');
      for (const m of ['checkpoint/inventory.img', 'config.dump', 'spec.dump']) assert.ok(members.includes(m), `${c.name}: ${m}`);
    }
    assert.deepEqual(manifest.networks.find((n) => n.interface === 'net1')?.cidrs, sourceSec.map((ip) => `${ip}/24`));
    // A live snapshot: the pod runs on, thawed.
    for (const id of ids) {
      const before = (await countedIn(env.rt, id)).length;
      await counting(env.rt, id, before + 3);
      assert.equal((await env.status(id)).state, 'CONTAINER_RUNNING');
    }
    await env.rt.runtime.call('StopPodSandbox', { pod_sandbox_id: pod.id });
    const before = await Promise.all(ids.map((id) => countedIn(env.rt, id)));
    await env.rt.runtime.call('RemovePodSandbox', { pod_sandbox_id: pod.id });

    // The emptyDir is kubelet's: provided again on the new node, with what it held.
    const data2 = join(dir, 'data-b');
    await cp(data, data2, { recursive: true });
    const unchanged = await snapshot(checkpointDir);
    const config = targetConfig('pctarget');
    const restored = await restorePod({ checkpoint_path: checkpointDir, config, container_configs: restoreConfigs(digest, data2) });
    assert.deepEqual(restored.restored_containers.map((r) => r.name), ['one', 'two']);
    assert.equal(new Set(restored.restored_containers.map((r) => r.container_id)).size, 2);
    const podId = restored.pod_sandbox_id;
    for (const { container_id: id } of restored.restored_containers) {
      assert.equal((await second.client.runtime.call('ContainerStatus', { container_id: id })).status!.state, 'CONTAINER_CREATED');
    }
    assert.deepEqual(await snapshot(checkpointDir), unchanged, 'the checkpoint directory is only read');

    for (const { container_id: id } of restored.restored_containers) await second.client.runtime.call('StartContainer', { container_id: id });
    for (const [i, { container_id: id }] of restored.restored_containers.entries()) {
      const after = await counting(second.client, id, 3);
      const last = before[i]!.at(-1)!;
      // No restart at 1: the first line of the new log follows the old log's last.
      assert.ok(after[0]! > 5 && after[0]! <= last + 1, `${id}: restored at ${after[0]}, the old log ended at ${last}`);
      for (let k = 1; k < after.length; k++) assert.equal(after[k], after[k - 1]! + 1, `counts on by one: ${after.join(' ')}`);
    }
    const target = await networkStatus(second.client, podId);
    t.diagnostic(`default ${source.ip} -> ${target.ip}, secondary ${sourceSec.join(' ')} -> ${target.status.find((e) => e.interface === 'net1')?.ips?.join(' ')}`);
    assert.ok(source.ip.startsWith(`10.233.${A}.`) && target.ip.startsWith(`10.233.${B}.`), `the default address is the new node's: ${source.ip} -> ${target.ip}`);
    assert.deepEqual(target.status.find((e) => e.interface === 'net1')?.ips, sourceSec, 'the secondary address is kept');
    const inside = await second.client.runtime.call('ExecSync', {
      container_id: restored.restored_containers[0]!.container_id, cmd: ['ip', '-4', 'addr', 'show', 'net1'], timeout: 10,
    });
    assert.match(inside.stdout.toString(), new RegExp(`inet ${sourceSec[0]!.replaceAll('.', '\\.')}/24`), 'the interface is back in the pod');
    // Both write to the shared directory again.
    const shared = Number((await readFile(join(data2, 'one'), 'utf8')).trim());
    for (const deadline = Date.now() + 10_000; Number((await readFile(join(data2, 'one'), 'utf8')).trim()) <= shared;) {
      assert.ok(Date.now() < deadline, 'the restored counter writes to the shared directory');
      await sleep(100);
    }
    await second.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: podId });
  });

  it('a TCP connection between the pod\'s containers over loopback survives the migration: the same connection carries on', async (t) => {
    if (!criuWorks(t)) return;
    const digest = await baseDigest();
    const { pod, ids, out, client } = await checkpointedNcPair(t, 'pctcp', async () => '127.0.0.1', 5);
    assert.equal((JSON.parse(await readFile(join(out, 'pod.json'), 'utf8')) as { tcpEstablished?: boolean }).tcpEstablished, true);
    // Thawed, the connection carries on here too (CRIU's network lock is lifted).
    await counting(env.rt, ids[0]!, (await countedIn(env.rt, ids[0]!)).length + 3);
    await env.rt.runtime.call('StopPodSandbox', { pod_sandbox_id: pod.id });
    await env.rt.runtime.call('RemovePodSandbox', { pod_sandbox_id: pod.id });

    const restored = await restoreNcPair(digest, 'pctcp', out, client);
    const [s, c] = restored.restored_containers.map((r) => r.container_id);
    for (const id of [s!, c!]) await second.client.runtime.call('StartContainer', { container_id: id });
    const after = await counting(second.client, s!, 5);
    assert.ok(after[0]! > 5, `the server receives the count where it was, not from 1: ${after[0]}`);
    for (let k = 1; k < after.length; k++) assert.equal(after[k], after[k - 1]! + 1, `one connection, nothing lost: ${after.join(' ')}`);
    assert.equal((await second.client.runtime.call('ContainerStatus', { container_id: c! })).status!.state, 'CONTAINER_RUNNING', 'the client never saw its connection break');
    const { netnsPath } = JSON.parse((await second.client.runtime.call('PodSandboxStatus', { pod_sandbox_id: restored.pod_sandbox_id, verbose: true })).info.info!) as { netnsPath: string };
    for (const tool of ['iptables', 'ip6tables']) {
      assert.doesNotMatch((await execa('nsenter', [`--net=${netnsPath}`, tool, '-S', 'OUTPUT'])).stdout, /RST/, `${tool}: the pod's loopback resets flow again`);
    }
    await second.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: restored.pod_sandbox_id });
  });

  it('a connection on the default network\'s address, which the new pod does not have, fails that container\'s start clearly', async (t) => {
    if (!criuWorks(t)) return;
    const digest = await baseDigest();
    const { pod, out, client } = await checkpointedNcPair(t, 'pctcpip', async (p) => (await networkStatus(env.rt, p.id)).ip, 3);
    await env.rt.runtime.call('RemovePodSandbox', { pod_sandbox_id: pod.id });
    const restored = await restoreNcPair(digest, 'pctcpip', out, client);
    const s = restored.restored_containers[0]!.container_id;
    try {
      await assert.rejects(second.client.runtime.call('StartContainer', { container_id: s }),
        grpcCode(grpc.status.FAILED_PRECONDITION, /restore of container "[0-9a-f]+" failed: .*CRIU: .*Can't bind inet socket back/s));
      assert.equal((await second.client.runtime.call('ContainerStatus', { container_id: s })).status!.state, 'CONTAINER_EXITED');
    } finally {
      // Also when the above fails: the tests after this one count the pods left.
      await second.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: restored.pod_sandbox_id });
    }
  });

  it('refuses bad requests with clear errors, leaving no sandbox, no container, no file', async (t) => {
    if (!criuWorks(t)) return;
    assert.ok(checkpointDir, 'the migration test wrote the checkpoint the restore refusals use');
    const digest = await baseDigest();
    const data = join(dir, 'data-bad');
    await mkdir(data);
    const { pod, ids } = await counterPod(t, 'pcbad', data);
    const other = await env.runPod(t, 'pcother');
    const foreign = await env.run(other, 'foreign', ['sleep', '1000']);
    const exited = await env.run(pod, 'exited', ['true']);
    await env.waitExited(exited);
    const out = join(dir, 'out');
    await mkdir(out);
    const refused = async (r: Partial<Parameters<typeof checkpointPod>[1]>, code: grpc.status, re: RegExp, timeoutMs?: number) => {
      await assert.rejects(checkpointPod(env.rt, { pod_sandbox_id: pod.id, output_path: out, container_ids: ids, ...r }, timeoutMs), grpcCode(code, re));
    };
    await refused({}, grpc.status.INVALID_ARGUMENT, /needs a deadline/, Infinity);
    await refused({ output_path: 'relative/dir' }, grpc.status.INVALID_ARGUMENT, /not an absolute path/);
    await refused({ output_path: join(dir, 'nosuch') }, grpc.status.INVALID_ARGUMENT, /does not exist/);
    await symlink(out, join(dir, 'link'));
    await refused({ output_path: join(dir, 'link') }, grpc.status.INVALID_ARGUMENT, /is a symlink/);
    await refused({ container_ids: [] }, grpc.status.INVALID_ARGUMENT, /container_ids is empty/);
    await refused({ container_ids: [ids[0]!, ids[0]!] }, grpc.status.INVALID_ARGUMENT, /twice/);
    await refused({ container_ids: [ids[0]!, foreign] }, grpc.status.INVALID_ARGUMENT, /belongs to pod/);
    await refused({ container_ids: [ids[0]!, exited] }, grpc.status.FAILED_PRECONDITION, /not running/);
    await refused({ options: { 'leave-frozen': 'true' } }, grpc.status.INVALID_ARGUMENT, /option "leave-frozen" not supported/);
    await writeFile(join(out, 'mine'), 'x');
    await refused({}, grpc.status.INVALID_ARGUMENT, /is not empty/);
    assert.deepEqual(await readdir(out), ['mine'], 'only the caller\'s file is there');
    await rm(join(out, 'mine'));
    for (const id of ids) assert.equal(await runcStatus(id), 'running', 'nothing was frozen');
    // Past its deadline mid-way: DEADLINE_EXCEEDED; the next checkpoint of the pod waits for the cut one's end, after
    // which its containers run thawed and nothing of it is left.
    await refused({}, grpc.status.DEADLINE_EXCEEDED, /./, 250);
    const next = join(dir, 'out-next');
    await mkdir(next);
    await checkpointPod(env.rt, { pod_sandbox_id: pod.id, output_path: next, container_ids: ids });
    assert.deepEqual(await readdir(out), [], 'nothing of the cut checkpoint is left');
    for (const id of ids) {
      assert.equal(await runcStatus(id), 'running', 'thawed');
      assert.deepEqual((await readdir(join(env.dirs.rootDir, 'containers', id))).filter((f) => f.startsWith('checkpoint')), [], 'no work dir is left');
    }

    // RestorePod refusals in the second daemon; one pod there holds the checkpointed secondary address.
    const manifest = JSON.parse(await readFile(join(checkpointDir, 'pod.json'), 'utf8')) as { networks: { interface: string; cidrs: string[] }[] };
    const secCidrs = manifest.networks.find((n) => n.interface === 'net1')!.cidrs;
    const unchanged = await snapshot(checkpointDir);
    const config = targetConfig('pcrefused');
    const configs = restoreConfigs(digest, data);
    const nothingMade = async () => {
      assert.deepEqual((await second.client.runtime.call('ListPodSandbox', {})).items.map((p) => p.metadata!.name).filter((n) => n !== 'pcholder'), []);
      assert.deepEqual((await second.client.runtime.call('ListContainers', {})).containers, []);
      assert.deepEqual(await snapshot(checkpointDir), unchanged);
    };
    const restoreRefused = async (r: Partial<Parameters<typeof restorePod>[0]>, code: grpc.status, re: RegExp, timeoutMs?: number) => {
      await assert.rejects(restorePod({ checkpoint_path: checkpointDir, config, container_configs: configs, ...r }, timeoutMs), grpcCode(code, re));
      await nothingMade();
    };
    await restoreRefused({}, grpc.status.INVALID_ARGUMENT, /needs a deadline/, Infinity);
    await restoreRefused({ options: { x: 'y' } }, grpc.status.INVALID_ARGUMENT, /option "x" not supported/);
    await restoreRefused({ runtime_handler: 'nosuch' }, grpc.status.INVALID_ARGUMENT, /runtime handler "nosuch" is not configured/);
    await restoreRefused({ container_configs: configs.slice(0, 1) }, grpc.status.INVALID_ARGUMENT, /no container_configs entry for "two"/);
    await restoreRefused({ container_configs: [configs[0]!, { ...configs[1]!, metadata: { name: 'three', attempt: 0 } }] },
      grpc.status.INVALID_ARGUMENT, /no container named "three" in the checkpoint/);
    await restoreRefused({ container_configs: [configs[0]!, { ...configs[1]!, command: ['sleep', '1'] }] },
      grpc.status.FAILED_PRECONDITION, /another process than the checkpointed one/);
    await restoreRefused({ config: podConfig('pcforeign', (c) => { c.metadata!.namespace = 'minicri-test-other'; c.log_directory = join(dirs2.base, 'logs', 'f'); }) },
      grpc.status.PERMISSION_DENIED, /taken in namespace "minicri-test" \(pod "pcsource"\): it restores only into a pod of that namespace/);
    const outside = join(dir, 'outside');
    await cp(checkpointDir, outside, { recursive: true });
    await restoreRefused({ checkpoint_path: outside }, grpc.status.INVALID_ARGUMENT, /outside .* \(restore\.archive_dir\)/);
    const partial = join(archives, 'partial');
    await cp(checkpointDir, partial, { recursive: true });
    const [archive] = await readdir(join(partial, 'containers'));
    await rm(join(partial, 'containers', archive!));
    await restoreRefused({ checkpoint_path: partial }, grpc.status.INVALID_ARGUMENT, /has no archive containers\/.*it is incomplete/);
    await rm(join(partial, 'pod.json'));
    await restoreRefused({ checkpoint_path: partial }, grpc.status.NOT_FOUND, /has no pod\.json/);
    const holder = await second.client.runtime.call('RunPodSandbox', {
      config: podConfig('pcholder', (c) => { c.log_directory = join(dirs2.base, 'logs', 'pcholder'); secondaryOf(secCidrs)(c); }),
    });
    await restoreRefused({}, grpc.status.FAILED_PRECONDITION, new RegExp(`address ${secCidrs[0]!.split('/')[0]!.replaceAll('.', '\\.')} of the checkpointed pod is taken by pod minicri-test/pcholder`));
    await second.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: holder.pod_sandbox_id });
  });

  it('a daemon killed while the pod is frozen, or while it is restored, leaves nothing after its restart, every container thawed', async (t) => {
    if (!criuWorks(t)) return;
    const digest = await baseDigest();
    const data = join(dir, 'data-crash');
    await mkdir(data);
    const { pod, ids } = await counterPod(t, 'pccrash', data);
    const out = join(archives, 'crash');
    await mkdir(out);
    assert.equal(await env.daemon.stop(), 0);
    env.daemon = await TestDaemon.start(env.dirs, { MINICRI_TEST_CRASH_AT: 'pod-checkpoint-dumped' });
    await assert.rejects(checkpointPod(env.rt, { pod_sandbox_id: pod.id, output_path: out, container_ids: ids }),
      (err: grpc.ServiceError) => err.code === grpc.status.UNAVAILABLE || err.code === grpc.status.INTERNAL);
    await env.daemon.exited;
    for (const id of ids) assert.equal(await runcStatus(id), 'paused', 'the crash came while the pod was frozen');
    env.daemon = await TestDaemon.start(env.dirs);
    assert.deepEqual(await readdir(out), [], 'recovery removed what the cut-off checkpoint wrote');
    for (const id of ids) {
      assert.equal(await runcStatus(id), 'running', 'recovery thawed it');
      await counting(env.rt, id, (await countedIn(env.rt, id)).length + 3);
    }
    assert.deepEqual((await readdir(join(env.dirs.rootDir, 'containers', ids[0]!))).filter((f) => f.startsWith('checkpoint')), [], 'no work dir is left');

    // A whole checkpoint now, then a restore cut off once its containers are made.
    await checkpointPod(env.rt, { pod_sandbox_id: pod.id, output_path: out, container_ids: ids });
    const unchanged = await snapshot(out);
    await second.stop();
    second = await TestDaemon.start(dirs2, { MINICRI_TEST_CRASH_AT: 'pod-restore-containers-created' });
    const config = podConfig('pccrash', (c) => { c.log_directory = join(dirs2.base, 'logs', 'pccrash'); secondaryOf()(c); });
    await assert.rejects(restorePod({ checkpoint_path: out, config, container_configs: restoreConfigs(digest, data) }),
      (err: grpc.ServiceError) => err.code === grpc.status.UNAVAILABLE || err.code === grpc.status.INTERNAL);
    await second.exited;
    second = await TestDaemon.start(dirs2);
    // Recovery removes the half-restored pod in the background: wait for it to go.
    for (const deadline = Date.now() + 20_000; (await second.client.runtime.call('ListPodSandbox', {})).items.length > 0;) {
      assert.ok(Date.now() < deadline, 'the cut-off restore is undone');
      await sleep(100);
    }
    assert.deepEqual((await second.client.runtime.call('ListContainers', {})).containers, []);
    assert.deepEqual(await readdir(join(dirs2.rootDir, 'containers')).catch(() => []), [], 'no container dir is left');
    assert.deepEqual(await readdir(join(dirs2.rootDir, 'sandboxes')).catch(() => []), [], 'no sandbox dir is left');
    assert.deepEqual(await snapshot(out), unchanged, 'the checkpoint directory is only read');
  });
});
