// Load as kubelet makes it: 110 pods (kubelet's max-pods) with a container each, created at once and
// removed at once; then 500 pod lifecycles, after which the daemon's memory and fds are where they were.
import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { describe, it } from 'node:test';
import type { TestDaemon } from '../../support/daemon.js';
import { podDaemon } from '../../support/pod-daemon.js';
import { containerConfig, PAUSE_IMAGE, podConfig } from '../../support/pods.js';
import { rssBytes } from '../../support/rss.js';

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
  return { rssKiB: rssBytes(pid) / 1024, fds: (await readdir(`/proc/${pid}/fd`)).length };
}

describe('storm and soak', () => {
  const pod = podDaemon(74, 'the storm and soak tests', { extraToml: 'log_level = "info"' });

  it('starts 110 pods with a container each at once, then removes them at once, without an error', async () => {
    const ids = await Promise.all(Array.from({ length: 110 }, (_, i) => startPod(pod.daemon, `storm${i}`)));
    const running = (await pod.daemon.client.runtime.call('ListContainers', { filter: { state: { state: 'CONTAINER_RUNNING' } } })).containers;
    assert.equal(running.length, 110);
    assert.equal((await pod.net.allocatedIps()).length, 110);
    await Promise.all(ids.map((id) => removePod(pod.daemon, id)));
    assert.deepEqual((await pod.daemon.client.runtime.call('ListPodSandbox', {})).items, []);
    assert.deepEqual((await pod.daemon.client.runtime.call('ListContainers', {})).containers, []);
    assert.deepEqual(await pod.net.allocatedIps(), []);
  });

  it('keeps memory and file descriptors flat over 500 pod lifecycles', async () => {
    const lifecycles = async (from: number, count: number, parallel = 4) => {
      for (let i = from; i < from + count; i += parallel) {
        await Promise.all(Array.from({ length: Math.min(parallel, from + count - i) }, async (_, j) => removePod(pod.daemon, await startPod(pod.daemon, `soak${i + j}`))));
      }
    };
    await lifecycles(0, 50);
    const early = await usage(pod.daemon.process.pid!);
    await lifecycles(50, 450);
    const late = await usage(pod.daemon.process.pid!);
    assert.ok(late.fds <= early.fds * 1.1, `open fds grew from ${early.fds} to ${late.fds}`);
    assert.ok(late.rssKiB <= early.rssKiB * 1.1, `RSS grew from ${early.rssKiB} KiB to ${late.rssKiB} KiB`);
    assert.deepEqual(await pod.net.allocatedIps(), []);
  });
});
