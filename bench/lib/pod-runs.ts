// RunPodSandbox timed for each variant of one pod (how many networks it has, where its device comes from).
import type { PodSandboxConfig } from '../../gen/runtime/v1/PodSandboxConfig.js';
import type { CriClient } from '../../test/support/cri-client.js';
import { benchPod } from './pods.js';
import { summarize, timed, type Summary } from './stats.js';

export interface PodRunResult {
  errors: string[];
  /** RunPodSandbox by variant. */
  run: Record<string, Summary>;
}

/**
 * `n` timed RunPodSandbox (after one untimed) per variant, keyed by `label`; stop and remove are not timed.
 * `prepare` fits each pod's config to its variant and may return what undoes its side effects once the pod is gone.
 */
export async function podRunBench<V>(
  client: CriClient, logRoot: string, prefix: string, n: number, variants: readonly V[],
  label: (variant: V) => string, prepare: (config: PodSandboxConfig, variant: V) => (() => void) | void,
): Promise<PodRunResult> {
  const rt = client.runtime;
  const errors: string[] = [];
  const run: Record<string, Summary> = {};
  for (const variant of variants) {
    const samples: Record<string, number[]> = {};
    for (let i = 0; i <= n; i++) {
      const config = benchPod(prefix, logRoot);
      const undo = prepare(config, variant);
      try {
        const { pod_sandbox_id: pod } = await timed(i === 0 ? {} : samples, 'run', () => rt.call('RunPodSandbox', { config }));
        await rt.call('StopPodSandbox', { pod_sandbox_id: pod });
        await rt.call('RemovePodSandbox', { pod_sandbox_id: pod });
      } catch (err) {
        errors.push((err as Error).message);
      } finally {
        undo?.();
      }
    }
    run[label(variant)] = summarize(samples.run ?? []);
  }
  return { errors, run };
}
