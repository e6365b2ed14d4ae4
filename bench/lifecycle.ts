// lifecycle: N sequential pod lifecycles with one busybox container, every RPC timed: p50/p90/p99 per RPC and whole.
import type { CriClient } from '../test/support/cri-client.js';
import { benchContainer, benchPod } from './lib/pods.js';
import { summarize, timed, type Summary } from './lib/stats.js';

export const LIFECYCLE_STEPS = ['RunPodSandbox', 'CreateContainer', 'StartContainer', 'StopContainer', 'RemoveContainer', 'StopPodSandbox', 'RemovePodSandbox'] as const;
export type LifecycleStep = (typeof LIFECYCLE_STEPS)[number];

export interface LifecycleResult {
  n: number;
  errors: string[];
  rpc: Record<LifecycleStep, Summary>;
  whole: Summary;
}

/** Milliseconds per step of one lifecycle. */
export type LifecycleSamples = Record<string, number[]>;

export function lifecycleSummary(samples: LifecycleSamples, errors: string[]): LifecycleResult {
  const rpc = Object.fromEntries(LIFECYCLE_STEPS.map((s) => [s, summarize(samples[s] ?? [])])) as Record<LifecycleStep, Summary>;
  const count = Math.min(...LIFECYCLE_STEPS.map((s) => samples[s]?.length ?? 0));
  const whole = Array.from({ length: count }, (_, i) => LIFECYCLE_STEPS.reduce((a, s) => a + samples[s]![i]!, 0));
  return { n: count, errors, rpc, whole: summarize(whole) };
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

/** `n` timed lifecycles after one untimed warm-up. */
export async function lifecycleBench(client: CriClient, image: string, logRoot: string, n: number): Promise<LifecycleResult> {
  const samples: LifecycleSamples = {};
  const errors: string[] = [];
  for (let i = 0; i <= n; i++) {
    try {
      await oneLifecycle(client, image, logRoot, i === 0 ? {} : samples);
    } catch (err) {
      errors.push((err as Error).message);
    }
  }
  return lifecycleSummary(samples, errors);
}
