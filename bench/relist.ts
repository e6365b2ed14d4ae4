// relist and footprint. With P pods of two containers running, the calls kubelet's PLEG makes every second
// (ListPodSandbox, ListContainers, then PodSandboxStatus and ContainerStatus of each), timed per call.
// Around it, the daemon's memory and CPU at idle and with the pods running, and host memory per pod
// (daemon growth plus its conmon or shim processes), from /proc.
import type { Target } from './lib/targets.js';
import { drain } from './lib/targets.js';
import { benchContainer, benchPod } from './lib/pods.js';
import { cpuPercent, memoryOf, sumMemory, type Memory } from './lib/proc.js';
import { pool } from '../core/locks.js';
import { round, summarize, timed, type Summary } from './lib/stats.js';

const CPU_WINDOW_MS = 5000;
/** Pods are created a few at a time: this measures steady state, not a storm. */
const SETUP_CONCURRENCY = 4;

export interface FootprintSample {
  daemon: Memory;
  daemonCpuPercent: number;
  helpers: { count: number } & Memory;
}

export interface RelistResult {
  pods: number;
  iterations: number;
  /** Milliseconds per call, by RPC, and for all calls together. */
  rpc: Record<string, Summary>;
  allCalls: Summary;
  /** Milliseconds for one whole relist (every call in sequence). */
  relist: Summary;
  errors: string[];
}

export interface FootprintResult {
  pods: number;
  idle: FootprintSample;
  loaded: FootprintSample;
  /** Host memory per running pod in KiB: daemon PSS growth plus helper PSS, over the pods. */
  perPodPssKiB: number;
  perPodRssKiB: number;
}

/** The daemon's memory and CPU (over a few seconds) and its helpers' memory, now. */
export async function sample(target: Target): Promise<FootprintSample> {
  const helpers = await target.helpers();
  const [daemon, daemonCpuPercent, helperMem] = await Promise.all([
    memoryOf(target.pid), cpuPercent(target.pid, CPU_WINDOW_MS), sumMemory(helpers),
  ]);
  return { daemon, daemonCpuPercent: round(daemonCpuPercent, 2), helpers: { count: helpers.length, ...helperMem } };
}

export async function relistBench(
  target: Target, image: string, logRoot: string, pods: number, iterations: number,
): Promise<{ relist: RelistResult; footprint: FootprintResult }> {
  const rt = target.client.runtime;
  const errors: string[] = [];
  const idle = await sample(target);
  try {
    await pool(Array.from({ length: pods }), SETUP_CONCURRENCY, async () => {
    const config = benchPod('relist', logRoot);
    const { pod_sandbox_id: pod } = await rt.call('RunPodSandbox', { config }, { timeoutMs: 300_000 });
    for (const name of ['app', 'sidecar']) {
      const create = { pod_sandbox_id: pod, config: benchContainer(name, image), sandbox_config: config };
      const { container_id: id } = await rt.call('CreateContainer', create, { timeoutMs: 300_000 });
      await rt.call('StartContainer', { container_id: id }, { timeoutMs: 300_000 });
    }
    });
    await new Promise((r) => setTimeout(r, 2000));
    const loaded = await sample(target);
    const calls: Record<string, number[]> = {};
    const whole: Record<string, number[]> = {};
    // One relist untimed first: kubelet relists every second, so what counts is a relist after the last,
    // not the first one after the pods were made (cold code in the daemon and in this client, for both targets).
    for (let i = -1; i < iterations; i++) {
      const timing = i >= 0;
      const time = <T>(into: Record<string, number[]>, key: string, fn: () => Promise<T>) => (timing ? timed(into, key, fn) : fn());
      await time(whole, 'relist', async () => {
        const sandboxes = (await time(calls, 'ListPodSandbox', () => rt.call('ListPodSandbox', {}))).items;
        const containers = (await time(calls, 'ListContainers', () => rt.call('ListContainers', {}))).containers;
        for (const s of sandboxes) {
          await time(calls, 'PodSandboxStatus', () => rt.call('PodSandboxStatus', { pod_sandbox_id: s.id }))
            .catch((e: Error) => errors.push(e.message));
        }
        for (const c of containers) {
          await time(calls, 'ContainerStatus', () => rt.call('ContainerStatus', { container_id: c.id }))
            .catch((e: Error) => errors.push(e.message));
        }
        if (sandboxes.length !== pods || containers.length !== 2 * pods) {
          errors.push(`listed ${sandboxes.length} pods and ${containers.length} containers`);
        }
      });
    }
    const perPod = (k: keyof Memory) => round((loaded.daemon[k] - idle.daemon[k] + loaded.helpers[k]) / pods, 1);
    return {
      relist: {
        pods, iterations, errors,
        rpc: Object.fromEntries(Object.entries(calls).map(([k, v]) => [k, summarize(v)])),
        allCalls: summarize(Object.values(calls).flat()),
        relist: summarize(whole.relist!),
      },
      footprint: { pods, idle, loaded, perPodPssKiB: perPod('pssKiB'), perPodRssKiB: perPod('rssKiB') },
    };
  } finally {
    await drain(target.client);
  }
}

/** What one relist saw: each sandbox's state, and each container's pod and state, by id. */
export interface RelistSnapshot {
  pods: Map<string, string>;
  containers: Map<string, { pod: string; state: string }>;
}

export function snapshotOf(
  sandboxes: ReadonlyArray<{ id: string; state: string }>, containers: ReadonlyArray<{ id: string; pod_sandbox_id: string; state: string }>,
): RelistSnapshot {
  return {
    pods: new Map(sandboxes.map((s) => [s.id, s.state])),
    containers: new Map(containers.map((c) => [c.id, { pod: c.pod_sandbox_id, state: c.state }])),
  };
}

/**
 * The pods kubelet's generic PLEG asks the status of after a relist: those still listed whose sandbox is new or
 * changed state, or one of whose containers appeared, changed state or went away since the last relist. Pure.
 */
export function changedPods(prev: RelistSnapshot | undefined, next: RelistSnapshot): string[] {
  const changed = new Set<string>();
  for (const [id, state] of next.pods) if (prev?.pods.get(id) !== state) changed.add(id);
  for (const [id, c] of next.containers) if (prev?.containers.get(id)?.state !== c.state) changed.add(c.pod);
  for (const [id, c] of prev?.containers ?? []) if (!next.containers.has(id)) changed.add(c.pod);
  return [...changed].filter((id) => next.pods.has(id));
}
