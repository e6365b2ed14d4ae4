// Load as kubelet makes it: 110 pods (kubelet's max-pods) with a container each, created at once and
// removed at once; then 500 pod lifecycles, after which the daemon's memory and fds are where they were.
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { makeTestNet, type TestNet } from '../../support/cni-env.js';
import { makeDaemonDirs, removeDirs, TestDaemon, type DaemonDirs } from '../../support/daemon.js';
import { assertNothingLeft, hostSnapshot, type HostSnapshot } from '../../support/leaks.js';
import { containerConfig, PAUSE_IMAGE, podConfig } from '../../support/pods.js';

async function startPod(daemon: TestDaemon, name: string): Promise<string> {
  const config = podConfig(name);
  const { pod_sandbox_id: id } = await daemon.client.runtime.call('RunPodSandbox', { config });
  const { container_id: c } = await daemon.client.runtime.call('CreateContainer', { pod_sandbox_id: id, sandbox_config: config, config: containerConfig('app', PAUSE_IMAGE, ['/pause']) });
  await daemon.client.runtime.call('StartContainer', { container_id: c });
  return id;
}

async function removePod(daemon: TestDaemon, id: string): Promise<void> {
  await daemon.client.runtime.call('StopPodSandbox', { pod_sandbox_id: id });
  await daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: id });
}

async function usage(pid: number): Promise<{ rssKiB: number; fds: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return { rssKiB: Number(/^VmRSS:\s+(\d+)/m.exec(status)![1]), fds: (await readdir(`/proc/${pid}/fd`)).length };
}

describe('storm and soak', () => {
  let snapshot: HostSnapshot;
  let net: TestNet;
  let dirs: DaemonDirs;
  let daemon: TestDaemon;
  before(async () => {
    snapshot = await hostSnapshot();
    net = await makeTestNet(74);
    await net.writeBridgeConf();
    dirs = makeDaemonDirs('log_level = "info"', net);
    daemon = await TestDaemon.start(dirs);
  });
  after(async () => {
    await daemon.stop();
    await net.cleanup();
    removeDirs(dirs);
    await assertNothingLeft(snapshot, 'the storm and soak tests');
  });

  it('starts 110 pods with a container each at once, then removes them at once, without an error', async () => {
    const ids = await Promise.all(Array.from({ length: 110 }, (_, i) => startPod(daemon, `storm${i}`)));
    const running = (await daemon.client.runtime.call('ListContainers', { filter: { state: { state: 'CONTAINER_RUNNING' } } })).containers;
    assert.equal(running.length, 110);
    assert.equal((await net.allocatedIps()).length, 110);
    await Promise.all(ids.map((id) => removePod(daemon, id)));
    assert.deepEqual((await daemon.client.runtime.call('ListPodSandbox', {})).items, []);
    assert.deepEqual((await daemon.client.runtime.call('ListContainers', {})).containers, []);
    assert.deepEqual(await net.allocatedIps(), []);
  });

  it('keeps memory and file descriptors flat over 500 pod lifecycles', async () => {
    const lifecycles = async (from: number, count: number, parallel = 4) => {
      for (let i = from; i < from + count; i += parallel) {
        await Promise.all(Array.from({ length: Math.min(parallel, from + count - i) }, async (_, j) => removePod(daemon, await startPod(daemon, `soak${i + j}`))));
      }
    };
    await lifecycles(0, 50);
    const early = await usage(daemon.process.pid!);
    await lifecycles(50, 450);
    const late = await usage(daemon.process.pid!);
    assert.ok(late.fds <= early.fds * 1.1, `open fds grew from ${early.fds} to ${late.fds}`);
    assert.ok(late.rssKiB <= early.rssKiB * 1.1, `RSS grew from ${early.rssKiB} KiB to ${late.rssKiB} KiB`);
    assert.deepEqual(await net.allocatedIps(), []);
  });
});
