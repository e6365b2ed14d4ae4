// kill -9 at every step of a pod's start and stop, and a simulated host reboot: after a restart and
// kubelet-style convergence (stop and remove whatever is listed), nothing may be left on the host.
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { execa } from 'execa';
import type { TestNet } from '../../support/cni-env.js';
import { makeDaemonDirs, removeDirs, TestDaemon, type DaemonDirs } from '../../support/daemon.js';
import { checkThenClean, hostSnapshot, networkFixtureObjects } from '../../support/leaks.js';
import { testNetwork } from '../../support/pod-daemon.js';
import { containerConfig, PAUSE_IMAGE, podConfig } from '../../support/pods.js';

const PORTMAP = { type: 'portmap', capabilities: { portMappings: true } };

/** What kubelet does after a runtime restart: stop and remove every sandbox it does not want. */
async function converge(daemon: TestDaemon): Promise<void> {
  for (const c of (await daemon.client.runtime.call('ListContainers', {})).containers) {
    await daemon.client.runtime.call('RemoveContainer', { container_id: c.id });
  }
  for (const item of (await daemon.client.runtime.call('ListPodSandbox', {})).items) {
    await daemon.client.runtime.call('StopPodSandbox', { pod_sandbox_id: item.id });
    await daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: item.id });
  }
}

async function assertDaemonClean(net: TestNet, dirs: DaemonDirs, daemon: TestDaemon): Promise<void> {
  assert.deepEqual(await net.allocatedIps(), [], 'host-local holds no IP');
  assert.deepEqual((await daemon.client.runtime.call('ListPodSandbox', {})).items, [], 'no sandbox record');
  const runc = await execa('runc', ['--root', dirs.runcRoot, 'list', '-q'], { reject: false });
  assert.equal(runc.stdout.trim(), '', 'no runc container');
  assert.deepEqual(await readdir(`${dirs.rootDir}/images/rootfs`).catch(() => []), [], 'no root filesystem');
  assert.deepEqual(await readdir(net.cacheDir + '/results').catch(() => []), [], 'no CNI cache entry');
}

describe('crash recovery', () => {
  const network = testNetwork(65, 'the crash recovery tests', { network: (net) => net.writeBridgeConf({ extra: [PORTMAP] }) });

  /** Runs `operation` on a daemon set to die at `point`, restarts it, converges, and checks the host. */
  async function crashAt(point: string, operation: (daemon: TestDaemon) => Promise<unknown>): Promise<void> {
    const { net } = network;
    const before = await hostSnapshot();
    const dirs = makeDaemonDirs('', net);
    let daemon = await TestDaemon.start(dirs, { MINICRI_TEST_CRASH_AT: point });
    let passed = false;
    try {
      await assert.rejects(operation(daemon));
      assert.equal(await daemon.exited, -1, 'the daemon was killed');
      daemon = await TestDaemon.start(dirs);
      await converge(daemon);
      await assertDaemonClean(net, dirs, daemon);
      passed = true;
    } finally {
      await daemon.stop();
      // The host is checked before the daemon's dirs go (a failed test reports its own error; the suite's check then finds what it left).
      await checkThenClean(passed ? before : undefined, `the crash at ${point}`, networkFixtureObjects(net.bridge), () => removeDirs(dirs));
    }
  }

  const slug = (point: string) => point.replace(':', '-');
  for (const point of ['netns-created', 'cni-add:loopback', 'cni-add:bridge', 'cni-add:portmap', 'pause-rootfs-mounted', 'pause-created', 'pause-started']) {
    it(`leaves nothing when the daemon dies at ${point} during RunPodSandbox`, () =>
      crashAt(point, (daemon) => daemon.client.runtime.call('RunPodSandbox', { config: podConfig(`crash-${slug(point)}`) })));
  }
  for (const point of ['container-rootfs-mounted', 'container-created']) {
    it(`leaves nothing when the daemon dies at ${point} during CreateContainer`, () =>
      crashAt(point, async (daemon) => {
        const config = podConfig(`ctrcrash-${slug(point)}`);
        const { pod_sandbox_id: id } = await daemon.client.runtime.call('RunPodSandbox', { config });
        await daemon.client.runtime.call('CreateContainer', { pod_sandbox_id: id, sandbox_config: config, config: containerConfig('app', PAUSE_IMAGE, ['/pause']) });
      }));
  }
  /** A ready pod running one container (the pause image serves as its image). */
  async function podWithContainer(daemon: TestDaemon, name: string): Promise<{ pod: string; container: string }> {
    const config = podConfig(name);
    const { pod_sandbox_id: pod } = await daemon.client.runtime.call('RunPodSandbox', { config });
    const { container_id: container } = await daemon.client.runtime.call('CreateContainer', { pod_sandbox_id: pod, sandbox_config: config, config: containerConfig('app', PAUSE_IMAGE, ['/pause']) });
    await daemon.client.runtime.call('StartContainer', { container_id: container });
    return { pod, container };
  }

  it('leaves nothing when the daemon dies at container-stopped during StopContainer', () =>
    crashAt('container-stopped', async (daemon) => {
      const { container } = await podWithContainer(daemon, 'ctrstopcrash');
      await daemon.client.runtime.call('StopContainer', { container_id: container, timeout: 0 });
    }));
  // The record leaves before RemoveContainer answers (container-retired); the host objects go after it.
  for (const point of ['container-retired', 'container-runc-deleted']) {
    it(`leaves nothing when the daemon dies at ${point} during RemoveContainer or its cleanup`, () =>
      crashAt(point, async (daemon) => {
        const { container } = await podWithContainer(daemon, `ctrrmcrash-${slug(point)}`);
        await daemon.client.runtime.call('RemoveContainer', { container_id: container });
        await daemon.client.removalsSettled();
      }));
  }
  for (const point of ['pause-deleted', 'pause-rootfs-removed']) {
    it(`leaves nothing when the daemon dies at ${point} during RemovePodSandbox`, () =>
      crashAt(point, async (daemon) => {
        const { pod } = await podWithContainer(daemon, `rmcrash-${point}`);
        await daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: pod });
      }));
  }

  it('records a container as running when the daemon died right after starting it', async () => {
    const { net } = network;
    const dirs = makeDaemonDirs('', net);
    let daemon = await TestDaemon.start(dirs, { MINICRI_TEST_CRASH_AT: 'container-started' });
    try {
      const config = podConfig('startcrash');
      const { pod_sandbox_id: id } = await daemon.client.runtime.call('RunPodSandbox', { config });
      const { container_id: cid } = await daemon.client.runtime.call('CreateContainer', { pod_sandbox_id: id, sandbox_config: config, config: containerConfig('app', PAUSE_IMAGE, ['/pause']) });
      await assert.rejects(daemon.client.runtime.call('StartContainer', { container_id: cid }));
      assert.equal(await daemon.exited, -1);
      daemon = await TestDaemon.start(dirs);
      assert.equal((await daemon.client.runtime.call('ContainerStatus', { container_id: cid })).status!.state, 'CONTAINER_RUNNING');
      await converge(daemon);
      await assertDaemonClean(net, dirs, daemon);
    } finally {
      await daemon.stop();
      removeDirs(dirs);
    }
  });

  for (const point of ['cni-del:portmap', 'cni-del:bridge', 'sandbox-network-detached']) {
    it(`leaves nothing when the daemon dies at ${point} during StopPodSandbox`, () =>
      crashAt(point, async (daemon) => {
        const { pod_sandbox_id: id } = await daemon.client.runtime.call('RunPodSandbox', { config: podConfig(`stopcrash-${slug(point)}`) });
        await daemon.client.runtime.call('StopPodSandbox', { pod_sandbox_id: id });
      }));
  }

  it('after a simulated reboot, releases every IP and leaves removable NOTREADY pods', async () => {
    const { net } = network;
    const dirs = makeDaemonDirs('', net);
    let daemon = await TestDaemon.start(dirs);
    try {
      const ids = await Promise.all([1, 2, 3].map((i) => daemon.client.runtime.call('RunPodSandbox', { config: podConfig(`reboot${i}`) }).then((r) => r.pod_sandbox_id)));
      assert.equal((await net.allocatedIps()).length, 3);
      const netns = await Promise.all(ids.map(async (id) => JSON.parse((await daemon.client.runtime.call('PodSandboxStatus', { pod_sandbox_id: id, verbose: true })).info.info)));
      assert.equal(await daemon.stop(), 0);
      // The reboot: every pod process dies, /run is emptied (netns pins, shm mounts, runc and conmon state).
      for (const info of netns) await execa('kill', ['-9', String(info.pid)], { reject: false });
      await execa('sh', ['-c', `for p in $(pgrep -x conmon); do grep -qs '${dirs.base}' /proc/$p/cmdline && kill -9 $p; done; true`]);
      for (const info of netns) {
        await execa('umount', [info.netnsPath], { reject: false });
        await execa('rm', ['-f', info.netnsPath, info.netnsLink]);
      }
      const mounts = (await readFile('/proc/self/mounts', 'utf8')).split('\n').map((l) => l.split(' ')[1] ?? '').filter((m) => m.startsWith(dirs.stateDir) || m.startsWith(`${dirs.rootDir}/images/rootfs`));
      for (const m of mounts.reverse()) await execa('umount', ['-l', m], { reject: false });
      await execa('sh', ['-c', `rm -rf ${dirs.stateDir}/*`]);

      daemon = await TestDaemon.start(dirs);
      assert.deepEqual(await net.allocatedIps(), [], 'every IP is released at start');
      const states = (await daemon.client.runtime.call('ListPodSandbox', {})).items.map((i) => i.state);
      assert.deepEqual(states, ['SANDBOX_NOTREADY', 'SANDBOX_NOTREADY', 'SANDBOX_NOTREADY']);
      await converge(daemon);
      await assertDaemonClean(net, dirs, daemon);
    } finally {
      await daemon.stop();
      removeDirs(dirs);
    }
  });
});
