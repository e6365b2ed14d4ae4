// restart: the daemon killed with SIGKILL in the middle of a storm of P pods (once half of them have their
// sandbox), started again on the same state: milliseconds from the new process's start to its first answer.
// Then what kubelet does next (every pod stopped and removed) is timed too, and its errors counted.
import { benchContainer, benchPod } from './lib/pods.js';
import { drain, type Target } from './lib/targets.js';
import { now, round, since } from './lib/stats.js';

export interface RestartResult {
  pods: number;
  /** Sandboxes answered before the kill. */
  podsBeforeKill: number;
  /** From the restarted daemon's start to its first answer (Version). */
  firstAnswerMs: number;
  /** Stopping and removing everything listed after the restart. */
  convergeSeconds: number;
  /** The restarted daemon's own account of its start, where it gives one. */
  daemonStart?: Record<string, unknown>;
  errors: string[];
}

export async function restartBench(target: Target, image: string, logRoot: string, pods: number): Promise<RestartResult> {
  let sandboxes = 0;
  let halfway!: () => void;
  const half = new Promise<void>((resolve) => { halfway = resolve; });
  const storm = Promise.allSettled(Array.from({ length: pods }, async () => {
    const rt = target.client.runtime;
    const config = benchPod('restart', logRoot);
    const { pod_sandbox_id: pod } = await rt.call('RunPodSandbox', { config }, { timeoutMs: 300_000 });
    if (++sandboxes === Math.ceil(pods / 2)) halfway();
    const { container_id: id } = await rt.call('CreateContainer', { pod_sandbox_id: pod, config: benchContainer('app', image), sandbox_config: config }, { timeoutMs: 300_000 });
    await rt.call('StartContainer', { container_id: id }, { timeoutMs: 300_000 });
  }));
  await half;
  const podsBeforeKill = sandboxes;
  const firstAnswerMs = await target.killAndRestart();
  const daemonStart = target.lastStart();
  // The storm's calls still under way fail with the kill: they are what the crash cut off.
  await storm;
  const errors: string[] = [];
  const c0 = now();
  await drain(target.client).catch((err: Error) => { errors.push(err.message); });
  return { pods, podsBeforeKill, firstAnswerMs, convergeSeconds: round(since(c0) / 1000), daemonStart, errors };
}
