// Percentiles and medians over latency samples (milliseconds), rounded for JSON.

export interface Summary {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  mean: number;
}

/** Nearest-rank percentile of unsorted samples; NaN for none. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

export function median(samples: readonly number[]): number {
  const finite = samples.filter((s) => Number.isFinite(s));
  if (finite.length === 0) return Number.NaN;
  const sorted = [...finite].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function round(n: number, digits = 3): number {
  return Number.isFinite(n) ? Number(n.toFixed(digits)) : n;
}

export function summarize(samples: readonly number[]): Summary {
  const mean = samples.reduce((a, b) => a + b, 0) / (samples.length || 1);
  return {
    n: samples.length,
    p50: round(percentile(samples, 50)),
    p90: round(percentile(samples, 90)),
    p99: round(percentile(samples, 99)),
    mean: round(mean),
  };
}

/** Milliseconds since `t0` (from `now()`). */
export function since(t0: bigint): number {
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

export const now = (): bigint => process.hrtime.bigint();

/** Times `fn` into `into[key]` (milliseconds) and returns its result. */
export async function timed<T>(into: Record<string, number[]>, key: string, fn: () => Promise<T>): Promise<T> {
  const t0 = now();
  const result = await fn();
  (into[key] ??= []).push(since(t0));
  return result;
}
