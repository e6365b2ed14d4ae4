// A kind-style node: a stock Debian 12 (debootstrap minbase plus systemd) booted with systemd-nspawn, systemd its
// PID 1 and Debian's Node 18 its only node. Inside it, a checkout of minicri and the README's first command as
// written; then a pod with a container from a local registry, with each cgroup driver, driven through the
// node's socket; checks that systemd runs the daemon as a runtime unit should, that restarts and stops keep the
// pods, and that removal leaves nothing in the node. The node goes at the end and the host is as it was.
// Run by `npm run test:node` (as root; `setup.sh test` runs it after `npm test`); it needs Debian's mirror and the
// npm registry, as the README command does. Takes the integration tests' place on the host: run it alone.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { cgroupHierarchies } from '../../oci/runtime/cgroups.js';
import { CAP_SYS_RESOURCE, hasCapability, parseCapBnd } from '../../oci/runtime/oom.js';
import { pushBusybox } from '../support/busybox-image.js';
import { CriClient } from '../support/cri-client.js';
import { assertNothingLeft, hostSnapshot, type HostSnapshot } from '../support/leaks.js';
import { startRegistry, type TestRegistry } from '../support/registry.js';
import { until } from '../support/wait.js';
import { KindNode, NODE_BRIDGE, NODE_SUBNET } from './node.js';

const CHECKOUT = resolve(fileURLToPath(import.meta.url), '../../../..');
const SOCKET = '/run/minicri/minicri.sock';
const PRIVATE_NODE = '/usr/local/lib/minicri/node/bin/node';
const CONFIG = '/etc/minicri/minicri.toml';
// No default network of minicri's (minicri0 on 10.88.0.0/16) on the host's network: a bridge and subnet of the test's
// own, no gateway on the host and no masquerading, so nothing of it reaches beyond the bridge.
const BASE_CONFIG = `log_level = "info"\n[cni]\nwrite_default_network = false\n`;
const CONFLIST = JSON.stringify({
  cniVersion: '1.0.0', name: 'node-test',
  plugins: [{ type: 'bridge', bridge: NODE_BRIDGE, isGateway: false, ipMasq: false, ipam: { type: 'host-local', ranges: [[{ subnet: NODE_SUBNET }]] } }],
}, null, 2);

const alive = (pid: number) => { try { process.kill(pid, 0); return true; } catch { return false; } };

describe('a kind-style node: minicri under systemd on a stock Debian 12', { timeout: 40 * 60_000 }, () => {
  let snapshot: HostSnapshot;
  let registry: TestRegistry | undefined;
  let node: KindNode | undefined;
  let client: CriClient | undefined;
  let image = '';

  const inNode = (...cmd: string[]) => node!.exec(cmd, { reject: false });
  const unit = async (prop: string) => (await inNode('systemctl', 'show', '--value', `--property=${prop}`, 'minicri')).stdout.trim();
  const serving = async () => {
    await until('minicri active under systemd', async () => (await inNode('systemctl', 'is-active', 'minicri')).stdout.trim() === 'active');
    await until('minicri answering on its socket', async () => (await client!.runtime.call('Version', { version: 'v1' }, { timeoutMs: 2000 })).runtime_name === 'minicri');
  };

  before(async () => {
    snapshot = await hostSnapshot();
    registry = await startRegistry();
    image = await pushBusybox(registry, 'node');
    node = await KindNode.boot({
      checkout: CHECKOUT,
      files: { [CONFIG]: BASE_CONFIG, '/etc/cni/net.d/10-node-test.conflist': CONFLIST },
      log: (line) => console.log(`# ${line}`),
    });
  });

  after(async () => {
    client?.close();
    await node?.shutdown();
    await registry?.stop();
    // The host as it was: no netns, mount or conmon of the node's, no cgroup of it, no bridge.
    await assertNothingLeft(snapshot, 'the node test');
    for (const h of await cgroupHierarchies()) {
      assert.deepEqual((await readdir(h)).filter((d) => d.startsWith('minicri-node')), [], `cgroups of the node left in ${h}`);
    }
    assert.notEqual((await execa('ip', ['link', 'show', NODE_BRIDGE], { reject: false })).exitCode, 0, `the bridge ${NODE_BRIDGE} is left`);
  });

  it('is a stock Debian 12 with systemd as PID 1 and Debian\'s Node 18 as its only node', async () => {
    assert.equal((await inNode('cat', '/proc/1/comm')).stdout.trim(), 'systemd');
    assert.match((await inNode('cat', '/etc/debian_version')).stdout, /^12\./);
    assert.notEqual((await inNode('sh', '-c', 'command -v node')).exitCode, 0, 'no node before the README command');
  });

  it('installs minicri with the README\'s first command, and systemd runs it', { timeout: 30 * 60_000 }, async () => {
    const logFile = join(node!.dir, 'setup.log');
    const run = await node!.exec(['bash', '-c', `cd /root/minicri && ./scripts/setup.sh start > /root/setup.log 2>&1`], { reject: false, timeout: 30 * 60_000 });
    const log = await readFile(node!.path('/root/setup.log'), 'utf8').catch(() => '');
    await writeFile(logFile, log);
    assert.equal(run.exitCode, 0, `./scripts/setup.sh start failed (${run.exitCode}):\n${log.slice(-6000)}\n${run.stderr}`);
    // Debian's node stays the system's; minicri runs on the one setup.sh put beside it.
    assert.match((await inNode('node', '--version')).stdout, /^v18\./);
    assert.match((await inNode(PRIVATE_NODE, '--version')).stdout, /^v2\d\./);
    assert.match(await readFile(node!.path('/usr/local/bin/minicri'), 'utf8'), /\/usr\/local\/lib\/minicri\/node\/bin/);

    assert.equal((await inNode('systemctl', 'is-enabled', 'minicri')).stdout.trim(), 'enabled');
    const status = await inNode('systemctl', 'status', '--no-pager', 'minicri');
    assert.equal(status.exitCode, 0, status.stdout);
    assert.match(status.stdout, /Active: active \(running\)/);
    // What systemd made of the unit: a runtime's settings, no start limit to exhaust.
    assert.equal(await unit('KillMode'), 'process');
    assert.equal(await unit('Delegate'), 'yes');
    assert.equal(await unit('LimitNOFILE'), '1048576');
    assert.equal(await unit('Restart'), 'on-failure');
    assert.equal(await unit('StartLimitIntervalUSec'), '0');
    const mainPid = Number(await unit('MainPID'));
    assert.ok(mainPid > 0);
    const hostPid = await node!.hostPid(mainPid);
    // Node names its main thread (26: node-MainThread), and a process's comm is its main thread's name.
    assert.match(await readFile(`/proc/${hostPid}/comm`, 'utf8').then((s) => s.trim()), /^node(-MainThread)?$/);
    const exe = (await inNode('readlink', `/proc/${mainPid}/exe`)).stdout.trim();
    assert.equal(exe, PRIVATE_NODE, 'the unit runs minicri on the node setup.sh installed');
    // The runtime is the OOM killer's last choice, where the host lets it lower its score (CAP_SYS_RESOURCE).
    assert.equal(await unit('OOMScoreAdjust'), '-999');
    const canLower = hasCapability(parseCapBnd(await readFile('/proc/self/status', 'utf8')), CAP_SYS_RESOURCE);
    assert.equal((await readFile(node!.path(`/proc/${mainPid}/oom_score_adj`), 'utf8')).trim(), canLower ? '-999' : '0');
    await until('minicri\'s log in the journal', async () => /minicri serving/.test((await inNode('journalctl', '-u', 'minicri', '--no-pager', '-o', 'cat')).stdout));
    client = new CriClient(node!.path(SOCKET));
    await serving();
  });

  for (const driver of ['cgroupfs', 'systemd'] as const) {
    it(`runs a pod from a local registry with the ${driver} cgroup driver, keeps it across restart and stop, and removal leaves nothing`, { timeout: 5 * 60_000 }, async () => {
      assert.ok(client, 'minicri was installed');
      if (driver === 'systemd') {
        await writeFile(node!.path(CONFIG), `cgroup_driver = "systemd"\n${BASE_CONFIG}`);
        assert.equal((await inNode('systemctl', 'restart', 'minicri')).exitCode, 0);
        await serving();
      }
      assert.equal((await client!.runtime.call('RuntimeConfig', {})).linux?.cgroup_driver, driver.toUpperCase());
      const mountsBefore = await nodeMounts(node!);

      const uid = `${driver === 'systemd' ? 'b' : 'a'}0d5e6f7${process.pid}`;
      // kubelet's pod cgroup: a path for cgroupfs, a slice (systemd nests it under kubepods-besteffort.slice) for systemd.
      const cgroupParent = driver === 'systemd' ? `kubepods-besteffort-pod${uid}.slice` : `/kubepods/besteffort/pod${uid}`;
      const config = {
        metadata: { name: `web-${driver}`, namespace: 'default', uid, attempt: 0 },
        hostname: `web-${driver}`,
        log_directory: `/var/log/pods/default_web-${driver}_${uid}`,
        linux: { cgroup_parent: cgroupParent, security_context: { namespace_options: { network: 'POD' as const, pid: 'CONTAINER' as const, ipc: 'POD' as const } } },
      };
      const { pod_sandbox_id: podId } = await client!.runtime.call('RunPodSandbox', { config });
      const podStatus = await client!.runtime.call('PodSandboxStatus', { pod_sandbox_id: podId, verbose: true });
      assert.equal(podStatus.status!.state, 'SANDBOX_READY');
      const ip = podStatus.status!.network!.ip;
      assert.match(ip, /^10\.236\.0\.\d+$/);
      const { netnsPath } = JSON.parse(podStatus.info.info) as { netnsPath: string };
      assert.match(netnsPath, /^\/var\/run\/netns\/minicri-[0-9a-f]+$/);
      assert.ok(existsSync(node!.path(netnsPath)), 'the pod netns is pinned in the node');
      const eth0 = await execa('nsenter', [`--net=${node!.path(netnsPath)}`, 'ip', '-o', '-4', 'addr', 'show', 'eth0']);
      assert.match(eth0.stdout, new RegExp(`inet ${ip.replaceAll('.', '\\.')}/24`));

      await client!.image.call('PullImage', { image: { image } });
      const { container_id: ctrId } = await client!.runtime.call('CreateContainer', {
        pod_sandbox_id: podId, sandbox_config: config,
        config: { metadata: { name: 'app', attempt: 0 }, image: { image }, command: ['sh', '-c', `echo hello from ${driver}; exec sleep 3600`], log_path: 'app/0.log' },
      });
      await client!.runtime.call('StartContainer', { container_id: ctrId });
      const running = async () => {
        const s = await client!.runtime.call('ContainerStatus', { container_id: ctrId, verbose: true });
        assert.equal(s.status!.state, 'CONTAINER_RUNNING');
        return Number((JSON.parse(s.info.info) as { pid: number }).pid);
      };
      const innerPid = await running();
      const logPath = `${config.log_directory}/app/0.log`;
      const logLine = await until('the container\'s log', async () => (await readFile(node!.path(logPath), 'utf8')).match(/^\S+ stdout F hello from \w+$/m)?.[0]);
      assert.ok(logLine.endsWith(`hello from ${driver}`));
      const pid = await node!.hostPid(innerPid);
      // A pod's process is the OOM killer's before the runtime's.
      assert.equal((await readFile(`/proc/${pid}/oom_score_adj`, 'utf8')).trim(), '0');

      const cgroups = await readFile(`/proc/${pid}/cgroup`, 'utf8');
      if (driver === 'systemd') {
        // A transient scope in the pod's slice, made by the node's systemd, as runc's systemd driver does it.
        const scope = `minicri-${ctrId}.scope`;
        assert.match(cgroups, new RegExp(`:name=systemd:/.*/kubepods\\.slice/kubepods-besteffort\\.slice/kubepods-besteffort-pod${uid}\\.slice/${scope.replace('.', '\\.')}$`, 'm'));
        const shown = (await inNode('systemctl', 'show', '--property=ActiveState,Slice', scope)).stdout;
        assert.match(shown, /ActiveState=active/);
        assert.match(shown, new RegExp(`Slice=kubepods-besteffort-pod${uid}\\.slice`));
        assert.match(cgroups, new RegExp(`:memory:/.*/kubepods-besteffort-pod${uid}\\.slice/${scope.replace('.', '\\.')}$`, 'm'));
        // The pause has its scope too.
        const scopes = (await inNode('systemctl', 'list-units', '--plain', '--no-legend', '--state=active', 'minicri-*.scope')).stdout;
        assert.deepEqual(scopes.split('\n').map((l) => l.split(' ')[0]).filter(Boolean).sort(), [`minicri-${podId}.scope`, scope].sort());
      } else {
        assert.match(cgroups, new RegExp(`:memory:/.*/kubepods/besteffort/pod${uid}/${ctrId}$`, 'm'));
      }

      // Restart: a new daemon, the same pod and container.
      const before = Number(await unit('MainPID'));
      assert.equal((await inNode('systemctl', 'restart', 'minicri')).exitCode, 0);
      await serving();
      assert.notEqual(Number(await unit('MainPID')), before);
      assert.equal((await client!.runtime.call('PodSandboxStatus', { pod_sandbox_id: podId })).status!.state, 'SANDBOX_READY');
      assert.equal(await running(), innerPid);
      assert.ok(alive(pid));

      // Stop: the daemon goes, the containers stay, as with containerd and CRI-O.
      assert.equal((await inNode('systemctl', 'stop', 'minicri')).exitCode, 0);
      assert.equal((await inNode('systemctl', 'is-active', 'minicri')).stdout.trim(), 'inactive');
      assert.ok(alive(pid), 'the container outlives the stopped daemon');
      assert.ok((await nodeProcesses(node!, 'conmon')).length >= 2, 'the conmons outlive the stopped daemon');
      assert.equal((await inNode('systemctl', 'start', 'minicri')).exitCode, 0);
      await serving();
      assert.equal(await running(), innerPid);

      await client!.runtime.call('StopContainer', { container_id: ctrId, timeout: 2 });
      await client!.runtime.call('RemoveContainer', { container_id: ctrId });
      await client!.runtime.call('StopPodSandbox', { pod_sandbox_id: podId });
      await client!.runtime.call('RemovePodSandbox', { pod_sandbox_id: podId });

      // Nothing left in the node: netns, mounts, conmons, runc state, cgroups and scopes.
      assert.deepEqual((await readdir(node!.path('/var/run/netns')).catch(() => [])).filter((n) => n.startsWith('minicri-')), []);
      assert.deepEqual((await nodeMounts(node!)).filter((m) => !mountsBefore.includes(m)), []);
      assert.deepEqual(await nodeProcesses(node!, 'conmon'), []);
      assert.equal(await cgroupsNamed(node!, [podId, ctrId]), '');
      if (driver === 'systemd') {
        const units = await inNode('systemctl', 'list-units', '--all', '--plain', '--no-legend', 'minicri-*');
        assert.equal(units.stdout.trim(), '', 'no scope of the pod\'s is left');
        // The pod's slice is kubelet's, made and removed by it: as kubelet, remove it, with nothing of minicri's in it.
        assert.equal((await inNode('systemctl', 'stop', `kubepods-besteffort-pod${uid}.slice`)).exitCode, 0);
      }
      const doctor = await inNode('minicri', 'doctor');
      assert.equal(doctor.exitCode, 0, doctor.stdout + doctor.stderr);
    });
  }
});

/** The node's mounts of minicri's own (root filesystems, shm, netns pins). */
async function nodeMounts(node: KindNode): Promise<string[]> {
  return (await readFile(`/proc/${node.pid1}/mounts`, 'utf8')).split('\n').map((l) => l.split(' ')[1] ?? '')
    .filter((m) => m.includes('minicri') || m.startsWith('/var/run/netns/') || m.startsWith('/run/netns/')).sort();
}

/** Host PIDs of the node's processes with this command name. */
async function nodeProcesses(node: KindNode, comm: string): Promise<number[]> {
  const nodeNs = await execa('readlink', [`/proc/${node.pid1}/ns/pid`]).then((r) => r.stdout);
  const found: number[] = [];
  for (const p of (await readdir('/proc')).filter((d) => /^\d+$/.test(d))) {
    const name = await readFile(`/proc/${p}/comm`, 'utf8').catch(() => '');
    if (name.trim() !== comm) continue;
    const ns = await execa('readlink', [`/proc/${p}/ns/pid`], { reject: false }).then((r) => r.stdout);
    if (ns === nodeNs && !(await readFile(`/proc/${p}/stat`, 'utf8').catch(() => ' Z ')).includes(') Z ')) found.push(Number(p));
  }
  return found;
}

/** Cgroup directories anywhere in the node's hierarchies whose names carry one of these ids. */
async function cgroupsNamed(node: KindNode, ids: string[]): Promise<string> {
  const pattern = ids.map((id) => `-name '*${id}*'`).join(' -o ');
  return (await node.exec(['sh', '-c', `find /sys/fs/cgroup -mindepth 1 -type d \\( ${pattern} \\) 2>/dev/null`], { reject: false })).stdout.trim();
}
