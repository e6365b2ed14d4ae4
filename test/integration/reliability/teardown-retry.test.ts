// A chained plugin that fails ADD and then fails DEL twice: the pod's IP must not leak, and the failed
// teardown is visible and retried by the daemon itself until it succeeds.
import assert from 'node:assert/strict';
import { readFile, stat } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { podDaemon } from '../../support/pod-daemon.js';
import { execa } from 'execa';
import { containerConfig, PAUSE_IMAGE, podConfig } from '../../support/pods.js';
import { waitFor } from '../../support/wait.js';

describe('teardown that cannot be forgotten', () => {
  const pod = podDaemon(66, 'the teardown retry test', {
    network: (net) => net.writeBridgeConf({ extra: [{ type: 'mcnt-flaky', stateDir: net.recordDir, delFailures: 2 }] }),
  });

  it('leaks no IP and retries the failed DEL in the background until it succeeds', async () => {
    const pending = async () => JSON.parse((await pod.daemon.client.runtime.call('Status', { verbose: true })).info.pendingTeardowns) as { sandboxId: string; attempts: number; lastError: string }[];
    await assert.rejects(pod.daemon.client.runtime.call('RunPodSandbox', { config: podConfig('flaky') }), /mcnt-flaky refuses ADD/);
    assert.deepEqual(await pod.net.allocatedIps(), [], 'the IPAM plugin released the address despite the failing plugin');
    const [deferred] = await pending();
    assert.ok(deferred, 'the failed teardown is listed');
    assert.match(deferred.lastError, /mcnt-flaky DEL failure/);
    assert.deepEqual((await pod.daemon.client.runtime.call('ListPodSandbox', {})).items, [], 'kubelet sees no half-made sandbox');
    const deadline = Date.now() + 15_000;
    while ((await pending()).length > 0) {
      assert.ok(Date.now() < deadline, 'the deferred teardown did not complete within 15 s');
      await new Promise((r) => setTimeout(r, 200));
    }
    const dels = Number(await readFile(`${pod.net.recordDir}/del.${deferred.sandboxId}`, 'utf8'));
    assert.equal(dels, 3, 'two failed DELs, then the retry that succeeded');
  });
});

describe('removal that cannot be forgotten', () => {
  const pod = podDaemon(76, 'the removal retry test');

  it('removes a container at once, lists its failed cleanup as pending, and finishes the cleanup by itself', async () => {
    const client = pod.daemon.client;
    const config = podConfig('undeletable');
    const { pod_sandbox_id: sandbox } = await client.runtime.call('RunPodSandbox', { config });
    const { container_id: id } = await client.runtime.call('CreateContainer', { pod_sandbox_id: sandbox, sandbox_config: config, config: containerConfig('app', PAUSE_IMAGE, ['/pause']) });
    // An immutable file in the container's directory makes its cleanup fail, as a busy or broken filesystem would.
    const dir = `${pod.dirs.rootDir}/containers/${id}`;
    const stuck = `${dir}/config.json`;
    await execa('chattr', ['+i', stuck]);
    try {
      await client.runtime.call('RemoveContainer', { container_id: id });
      assert.deepEqual((await client.runtime.call('ListContainers', {})).containers, [], 'the container is gone for kubelet at once');
      await waitFor(async () => (await client.pendingRemovals()).some((p) => p.id === id && p.attempts >= 1), 20_000, 'the failed cleanup to be listed');
      const [pending] = await client.pendingRemovals();
      assert.equal(pending?.id, id);
      assert.match(pending!.lastError, /config\.json|operation not permitted|EPERM/i);
      await stat(dir);
    } finally {
      await execa('chattr', ['-i', stuck]);
    }
    await client.removalsSettled();
    await assert.rejects(stat(dir), { code: 'ENOENT' }, 'the retry removed its directory');
    await pod.daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: sandbox });
  });
});
