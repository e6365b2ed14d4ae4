// restart: the daemon killed with SIGKILL in the middle of a storm of P pods (once half of them have their
// sandbox), started again on the same state: milliseconds from the new process's start to its first answer.
// Then kubelet's convergence: it relists, makes again what the crash cut off (a new sandbox attempt for a pod
// with no ready sandbox, a new container attempt for one with no running container, 10 pods at a time as its
// pod workers do) and relists until every pod is READY with its container running: the seconds from the first
// answer to that relist. Last, every pod stopped and removed (timed too).
import type { PodSandboxConfig } from '../gen/runtime/v1/PodSandboxConfig.js';
import { pool } from '../core/locks.js';
import { benchContainer, benchPod } from './lib/pods.js';
import { drain, type Target } from './lib/targets.js';
import { now, round, since } from './lib/stats.js';

/** kubelet's pod workers: how many pods it syncs at once. */
export const KUBELET_POD_WORKERS = 10;
const CONVERGE_DEADLINE_MS = 60_000;

export interface RestartResult {
  pods: number;
  /** Sandboxes answered before the kill. */
  podsBeforeKill: number;
  /** From the restarted daemon's start to its first answer (Version). */
  firstAnswerMs: number;
  /**
   * From its start to its first answer to ListPodSandbox, asked right after that Version: a daemon that answers
   * Version before its recovery ends answers this one after it.
   */
  firstListMs: number;
  /** From that first answer until a full relist shows every pod READY with its container running. */
  allReadySeconds: number;
  /** Pods kubelet had to make again (sandbox or container) after the restart. */
  remade: number;
  /** Stopping and removing every pod after that. */
  teardownSeconds: number;
  /** The restarted daemon's own account of its start, where it gives one. */
  daemonStart?: Record<string, unknown>;
  errors: string[];
}

const uid = (c: PodSandboxConfig) => c.metadata?.uid ?? '';

/** A pod's ready sandbox and running container as one relist sees them, by the pod's uid. */
interface PodView { sandbox?: string; running: boolean }

/** kubelet's relist: both lists and the status of each pod; what it sees of each pod uid. */
async function relist(target: Target): Promise<Map<string, PodView>> {
  const rt = target.client.runtime;
  const [{ items }, { containers }] = await Promise.all([rt.call('ListPodSandbox', {}), rt.call('ListContainers', {})]);
  const seen = new Map<string, PodView>();
  for (const s of items) {
    // A sandbox the daemon's recovery removes between the list and its status is gone, as kubelet would take it.
    const status = (await rt.call('PodSandboxStatus', { pod_sandbox_id: s.id }).catch(() => undefined))?.status;
    if (status?.state !== 'SANDBOX_READY' || !s.metadata) continue;
    const running = containers.some((c) => c.pod_sandbox_id === s.id && c.state === 'CONTAINER_RUNNING');
    const prior = seen.get(s.metadata.uid ?? '');
    if (!prior?.running) seen.set(s.metadata.uid ?? '', { sandbox: s.id, running });
  }
  return seen;
}

/** Makes again what each pod lacks, `KUBELET_POD_WORKERS` at a time; returns how many it touched. */
async function remake(target: Target, configs: PodSandboxConfig[], image: string, seen: Map<string, PodView>, errors: string[]): Promise<number> {
  const rt = target.client.runtime;
  const lacking = configs.filter((c) => !seen.get(uid(c))?.running);
  await pool(lacking, KUBELET_POD_WORKERS, async (base) => {
    try {
      let pod = seen.get(uid(base))?.sandbox;
      const config = { ...base, metadata: { ...base.metadata!, attempt: 1 } };
      if (!pod) pod = (await rt.call('RunPodSandbox', { config }, { timeoutMs: 300_000 })).pod_sandbox_id;
      const container = benchContainer('app', image);
      container.metadata = { name: 'app', attempt: 1 };
      const { container_id: id } = await rt.call('CreateContainer', { pod_sandbox_id: pod, config: container, sandbox_config: config }, { timeoutMs: 300_000 });
      await rt.call('StartContainer', { container_id: id }, { timeoutMs: 300_000 });
    } catch (err) {
      errors.push(`remaking ${base.metadata!.name}: ${(err as Error).message}`);
    }
  });
  return lacking.length;
}

export async function restartBench(target: Target, image: string, logRoot: string, pods: number): Promise<RestartResult> {
  let sandboxes = 0;
  let halfway!: () => void;
  const half = new Promise<void>((resolve) => { halfway = resolve; });
  const configs = Array.from({ length: pods }, () => benchPod('restart', logRoot));
  const storm = Promise.allSettled(configs.map(async (config) => {
    const rt = target.client.runtime;
    const { pod_sandbox_id: pod } = await rt.call('RunPodSandbox', { config }, { timeoutMs: 300_000 });
    if (++sandboxes === Math.ceil(pods / 2)) halfway();
    const { container_id: id } = await rt.call('CreateContainer', { pod_sandbox_id: pod, config: benchContainer('app', image), sandbox_config: config }, { timeoutMs: 300_000 });
    await rt.call('StartContainer', { container_id: id }, { timeoutMs: 300_000 });
  }));
  await half;
  const podsBeforeKill = sandboxes;
  const firstAnswerMs = await target.killAndRestart();
  const answered = now();
  await target.client.runtime.call('ListPodSandbox', {}, { timeoutMs: 60_000 });
  const firstListMs = round(firstAnswerMs + since(answered), 1);
  const daemonStart = target.lastStart();
  // The storm's calls still under way fail with the kill: they are what the crash cut off.
  await storm;
  const errors: string[] = [];
  let remade = 0;
  let allReadySeconds = Number.NaN;
  try {
    let seen = await relist(target);
    remade = await remake(target, configs, image, seen, errors);
    for (;;) {
      seen = await relist(target);
      if (configs.every((c) => seen.get(uid(c))?.running)) { allReadySeconds = round(since(answered) / 1000); break; }
      if (since(answered) > CONVERGE_DEADLINE_MS) { errors.push(`not every pod ready ${CONVERGE_DEADLINE_MS / 1000} s after the restart`); break; }
      await new Promise((r) => setTimeout(r, 100));
    }
  } catch (err) {
    errors.push((err as Error).message);
  }
  const c0 = now();
  await drain(target.client).catch((err: Error) => { errors.push(err.message); });
  return { pods, podsBeforeKill, firstAnswerMs, firstListMs, allReadySeconds, remade, teardownSeconds: round(since(c0) / 1000), daemonStart, errors };
}
