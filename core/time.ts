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

/** Resolves after `ms`; `unref` lets the process exit meanwhile; an abort of `signal` rejects with its reason. */
export function sleep(ms: number, o: { unref?: boolean; signal?: AbortSignal } = {}): Promise<void> {
  return timeout(ms, undefined, { ref: !o.unref, signal: o.signal }).catch((err: unknown) => {
    throw o.signal?.aborted ? o.signal.reason : err;
  });
}
