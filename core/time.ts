// CRI timestamps (nanoseconds since the epoch as decimal strings: int64 overflows a double), and waiting.
import { setTimeout as timeout } from 'node:timers/promises';

/** The wall clock at an arbitrary point, in nanoseconds, minus the monotonic clock then. */
const EPOCH_OFFSET = BigInt(Date.now()) * 1_000_000n - process.hrtime.bigint();

/** A time in Unix milliseconds as a CRI timestamp. */
export function nanosFromMillis(ms: number): string {
  return (BigInt(Math.trunc(ms)) * 1_000_000n).toString();
}

/** Now as a CRI timestamp; never goes backwards. */
export function nowNanos(): string {
  return (EPOCH_OFFSET + process.hrtime.bigint()).toString();
}

/** The longest delay Node's timers keep (2^31-1 ms, about 24.8 days): a longer one fires at once, or throws. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** `ms` as a timer's delay: at least 0, at most MAX_TIMER_MS (as good as for ever for a call). Pure. */
export function timerDelay(ms: number): number {
  return Math.min(Math.max(ms, 0), MAX_TIMER_MS);
}

/** Resolves after `ms`; `unref` lets the process exit meanwhile; an abort of `signal` rejects with its reason. */
export function sleep(ms: number, o: { unref?: boolean; signal?: AbortSignal } = {}): Promise<void> {
  return timeout(ms, undefined, { ref: !o.unref, signal: o.signal }).catch((err: unknown) => {
    throw o.signal?.aborted ? o.signal.reason : err;
  });
}

/**
 * Resolves when `work` settles, however it ends, or after `ms`, whichever comes first: for a wait that may be
 * cut short while the work goes on. Its timer does not outlive the wait.
 */
export async function settledWithin(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const elapsed = new Promise<void>((resolve) => { timer = setTimeout(resolve, timerDelay(ms)); });
  try {
    await Promise.race([work.then(() => undefined, () => undefined), elapsed]);
  } finally {
    clearTimeout(timer);
  }
}
