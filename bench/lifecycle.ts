// lifecycle: N sequential pod lifecycles with one busybox container, every RPC timed: p50/p90/p99 per RPC and whole;
// then N pods with no container (cri-tools' pod benchmark: RunPodSandbox, StopPodSandbox, RemovePodSandbox), so
// StopPodSandbox is measured with its container stopped and removed before, and with none at all.
import type { CriClient } from '../test/support/cri-client.js';
import { benchContainer, benchPod } from './lib/pods.js';
import { summarize, timed, type Summary } from './lib/stats.js';

export const LIFECYCLE_STEPS = ['RunPodSandbox', 'CreateContainer', 'StartContainer', 'StopContainer', 'RemoveContainer', 'StopPodSandbox', 'RemovePodSandbox'] as const;
export type LifecycleStep = (typeof LIFECYCLE_STEPS)[number];

export const POD_ONLY_STEPS = ['RunPodSandbox', 'StopPodSandbox', 'RemovePodSandbox'] as const;

export interface LifecycleResult {
  n: number;
  errors: string[];
  rpc: Record<LifecycleStep, Summary>;
  whole: Summary;
  /** The pods with no container, per step and whole (absent from the floor's). */
  podOnly?: { rpc: Record<string, Summary>; whole: Summary; errors: string[] };
}

/** Milliseconds per step of one lifecycle. */
export type LifecycleSamples = Record<string, number[]>;

/** Per-step and whole summaries of `steps` timed together (only complete runs are in `samples`). Pure. */
function stepsSummary<S extends string>(steps: readonly S[], samples: LifecycleSamples): { n: number; rpc: Record<S, Summary>; whole: Summary } {
  const rpc = Object.fromEntries(steps.map((s) => [s, summarize(samples[s] ?? [])])) as Record<S, Summary>;
  const count = Math.min(...steps.map((s) => samples[s]?.length ?? 0));
  const whole = Array.from({ length: count }, (_, i) => steps.reduce((a, s) => a + samples[s]![i]!, 0));
  return { n: count, rpc, whole: summarize(whole) };
}

export function lifecycleSummary(samples: LifecycleSamples, errors: string[]): LifecycleResult {
  return { ...stepsSummary(LIFECYCLE_STEPS, samples), errors };
}

/** One lifecycle through the CRI; timings go into `into` (only when every step succeeded). */
async function oneLifecycle(client: CriClient, image: string, logRoot: string, into: LifecycleSamples): Promise<void> {
  const rt = client.runtime;
  const config = benchPod('life', logRoot);
  const local: LifecycleSamples = {};
  const { pod_sandbox_id: pod } = await timed(local, 'RunPodSandbox', () => rt.call('RunPodSandbox', { config }));
  try {
    const { container_id: id } = await timed(local, 'CreateContainer', () =>
      rt.call('CreateContainer', { pod_sandbox_id: pod, config: benchContainer('app', image), sandbox_config: config }));
    await timed(local, 'StartContainer', () => rt.call('StartContainer', { container_id: id }));
    await timed(local, 'StopContainer', () => rt.call('StopContainer', { container_id: id, timeout: '10' }));
    await timed(local, 'RemoveContainer', () => rt.call('RemoveContainer', { container_id: id }));
    await timed(local, 'StopPodSandbox', () => rt.call('StopPodSandbox', { pod_sandbox_id: pod }));
    await timed(local, 'RemovePodSandbox', () => rt.call('RemovePodSandbox', { pod_sandbox_id: pod }));
  } catch (err) {
    await rt.call('StopPodSandbox', { pod_sandbox_id: pod }).catch(() => undefined);
    await rt.call('RemovePodSandbox', { pod_sandbox_id: pod }).catch(() => undefined);
    throw err;
  }
  for (const [k, v] of Object.entries(local)) (into[k] ??= []).push(...v);
}

/** One pod with no container, as cri-tools' pod benchmark makes it. */
async function onePodOnly(client: CriClient, logRoot: string, into: LifecycleSamples): Promise<void> {
  const rt = client.runtime;
  const config = benchPod('podonly', logRoot);
  const local: LifecycleSamples = {};
  const { pod_sandbox_id: pod } = await timed(local, 'RunPodSandbox', () => rt.call('RunPodSandbox', { config }));
  try {
    await timed(local, 'StopPodSandbox', () => rt.call('StopPodSandbox', { pod_sandbox_id: pod }));
    await timed(local, 'RemovePodSandbox', () => rt.call('RemovePodSandbox', { pod_sandbox_id: pod }));
  } catch (err) {
    await rt.call('RemovePodSandbox', { pod_sandbox_id: pod }).catch(() => undefined);
    throw err;
  }
  for (const [k, v] of Object.entries(local)) (into[k] ??= []).push(...v);
}

/** `n` timed runs of `one` after one untimed warm-up; the errors of those that failed. */
async function repeat(n: number, one: (into: LifecycleSamples) => Promise<void>): Promise<{ samples: LifecycleSamples; errors: string[] }> {
  const samples: LifecycleSamples = {};
  const errors: string[] = [];
  for (let i = 0; i <= n; i++) {
    try {
      await one(i === 0 ? {} : samples);
    } catch (err) {
      errors.push((err as Error).message);
    }
  }
  return { samples, errors };
}

/** `n` timed whole-pod lifecycles, then `n` pods with no container, each after one untimed warm-up. */
export async function lifecycleBench(client: CriClient, image: string, logRoot: string, n: number): Promise<LifecycleResult> {
  const whole = await repeat(n, (into) => oneLifecycle(client, image, logRoot, into));
  const podOnly = await repeat(n, (into) => onePodOnly(client, logRoot, into));
  const po = stepsSummary(POD_ONLY_STEPS, podOnly.samples);
  return { ...lifecycleSummary(whole.samples, whole.errors), podOnly: { rpc: po.rpc, whole: po.whole, errors: podOnly.errors } };
}
