// storm: P pods started at once, each with one container: time until all run, each pod's time to running, errors;
// then all removed at once (timed too).
import type { CriClient } from '../test/support/cri-client.js';
import { drain } from './lib/targets.js';
import { benchContainer, benchPod } from './lib/pods.js';
import { now, round, since, summarize, type Summary } from './lib/stats.js';

export interface StormResult {
  pods: number;
  /** Seconds from the first RunPodSandbox until every pod's container is started. */
  allRunningSeconds: number;
  /** Milliseconds each pod took from RunPodSandbox to StartContainer's answer. */
  perPod: Summary;
  errors: string[];
  /** Containers listed RUNNING once every pod had its answer. */
  running: number;
  teardownSeconds: number;
}

export async function stormBench(client: CriClient, image: string, logRoot: string, pods: number): Promise<StormResult> {
  const rt = client.runtime;
  const errors: string[] = [];
  const perPod: number[] = [];
  const t0 = now();
  await Promise.all(Array.from({ length: pods }, async () => {
    const p0 = now();
    try {
      const config = benchPod('storm', logRoot);
      const { pod_sandbox_id: pod } = await rt.call('RunPodSandbox', { config }, { timeoutMs: 300_000 });
      const { container_id: id } = await rt.call('CreateContainer', { pod_sandbox_id: pod, config: benchContainer('app', image), sandbox_config: config }, { timeoutMs: 300_000 });
      await rt.call('StartContainer', { container_id: id }, { timeoutMs: 300_000 });
      perPod.push(since(p0));
    } catch (err) {
      errors.push((err as Error).message);
    }
  }));
  const allRunningSeconds = since(t0) / 1000;
  const running = (await rt.call('ListContainers', { filter: { state: { state: 'CONTAINER_RUNNING' } } })).containers.length;
  const d0 = now();
  await drain(client, pods);
  return { pods, allRunningSeconds: round(allRunningSeconds), perPod: summarize(perPod), errors, running, teardownSeconds: round(since(d0) / 1000) };
}
