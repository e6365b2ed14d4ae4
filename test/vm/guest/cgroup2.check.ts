// cgroup v2 on a real node (check d): container and pod stats with memory, CPU, io and PSI read from the unified
// hierarchy; UpdateContainerResources written into the container's cgroup; the OOM killer's kill reported.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import type { PsiStats__Output } from '../../../gen/runtime/v1/PsiStats.js';
import { GuestEnv, until } from './env.js';

const MiB = 1024 * 1024;

/** The container's cgroup directory, from its process's entry in the unified hierarchy. */
async function cgroupDir(pid: number): Promise<string> {
  const line = (await readFile(`/proc/${pid}/cgroup`, 'utf8')).split('\n').find((l) => l.startsWith('0::'));
  assert.ok(line, `process ${pid} is in the unified hierarchy`);
  return `/sys/fs/cgroup${line.slice(3)}`;
}

function assertPsi(psi: PsiStats__Output | null | undefined, what: string): void {
  assert.ok(psi?.Some && psi.Full, `${what}: PSI with some and full: ${JSON.stringify(psi)}`);
  assert.match(String(psi.Some.Total), /^\d+$/, `${what}: PSI some total`);
}

describe('cgroup v2 in the VM: stats, PSI, resource updates, OOM kills', { timeout: 15 * 60_000 }, () => {
  let env: GuestEnv;
  before(async () => { env = await GuestEnv.start('cgroup2'); });
  after(() => env?.stop());

  it('reports container and pod stats with memory, CPU, io and PSI', async () => {
    const pod = await env.runPod('stats');
    const id = await env.run(pod, 'busy', ['sh', '-c', 'while :; do dd if=/dev/zero of=/tmp/f bs=1M count=8 2>/dev/null; sync; sleep 1; done']);
    const stats = await until('container stats with CPU used', async () => {
      const s = (await env.client.runtime.call('ContainerStats', { container_id: id })).stats;
      return s && Number(s.cpu?.usage_core_nano_seconds?.value ?? 0) > 0 ? s : undefined;
    });
    assert.ok(Number(stats.memory?.working_set_bytes?.value) > 0, `memory working set: ${JSON.stringify(stats.memory)}`);
    assert.ok(Number(stats.memory?.usage_bytes?.value) > 0, 'memory usage');
    assertPsi(stats.cpu?.psi, 'container CPU');
    assertPsi(stats.memory?.psi, 'container memory');
    assertPsi(stats.io?.psi, 'container io');

    const podStats = (await env.client.runtime.call('PodSandboxStats', { pod_sandbox_id: pod.id })).stats;
    const linux = podStats?.linux;
    assert.ok(Number(linux?.cpu?.usage_core_nano_seconds?.value) > 0, `pod CPU: ${JSON.stringify(linux?.cpu)}`);
    assert.ok(Number(linux?.memory?.working_set_bytes?.value) > 0, 'pod memory');
    assertPsi(linux?.cpu?.psi, 'pod CPU');
    assertPsi(linux?.memory?.psi, 'pod memory');
    assertPsi(linux?.io?.psi, 'pod io');
    assert.ok(linux?.containers.some((c) => c.attributes?.id === id), 'the pod\'s stats carry its container');
  });

  it('applies UpdateContainerResources to the container\'s cgroup', async () => {
    const pod = await env.runPod('update');
    const id = await env.run(pod, 'limited', ['sleep', '3600'], (c) => { c.linux = { resources: { memory_limit_in_bytes: String(128 * MiB) } }; });
    const dir = await cgroupDir(await env.pid(id));
    assert.equal((await readFile(`${dir}/memory.max`, 'utf8')).trim(), String(128 * MiB));
    await env.client.runtime.call('UpdateContainerResources', {
      container_id: id, linux: { memory_limit_in_bytes: String(96 * MiB), cpu_period: '100000', cpu_quota: '50000' },
    });
    assert.equal((await readFile(`${dir}/memory.max`, 'utf8')).trim(), String(96 * MiB));
    assert.equal((await readFile(`${dir}/cpu.max`, 'utf8')).trim(), '50000 100000');
    const limits = (await env.client.runtime.call('ContainerStatus', { container_id: id })).status!.resources?.linux;
    assert.equal(Number(limits?.memory_limit_in_bytes), 96 * MiB, 'ContainerStatus reports the new limit');
  });

  it('reports OOMKilled when a container outgrows its memory limit', async () => {
    const pod = await env.runPod('oom');
    // dd fills a 256 MiB block against a 32 MiB limit; as the container's init it takes the container down.
    const id = await env.run(pod, 'hog', ['dd', 'if=/dev/zero', 'of=/dev/null', 'bs=256M', 'count=1'], (c) => {
      c.linux = { resources: { memory_limit_in_bytes: String(32 * MiB) } };
    });
    const s = await env.waitExited(id);
    assert.equal(s.reason, 'OOMKilled', `exit ${s.exit_code}, reason ${s.reason}`);
    assert.equal(s.exit_code, 137);
  });
});
