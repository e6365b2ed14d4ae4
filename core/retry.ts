// Another try for work whose failures may pass (a reset connection, a busy server): a few attempts with
// exponentially growing waits between them, ending at once on a failure not worth retrying or when the caller
// gives up, so a cancelled call never sleeps through its own cancellation.
import { sleep } from './time.js';

export interface RetryOptions {
  /** Tries in all, the first included. */
  attempts: number;
  /** Whether a failure is worth another try; one it is not is thrown at once. */
  retryable: (err: unknown) => boolean;
  /** Its abort ends the retrying, a wait under way included, with the signal's reason. */
  signal?: AbortSignal;
  /** Hears of each failure about to be retried (`attempt` is the one that failed); awaited before the wait. */
  onRetry?: (err: unknown, attempt: number) => void | Promise<void>;
  /** The wait before the second try, doubled before each further one (default 200 ms). */
  backoffMs?: number;
}

/** Runs `fn` until it succeeds, a failure is not retryable, attempts run out (the last failure is thrown) or `signal` aborts. */
export async function retry<T>(fn: (attempt: number) => Promise<T>, opts: RetryOptions): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (err) {
      // A failure after the caller gave up is explained by why it gave up, not by what broke on the way out.
      opts.signal?.throwIfAborted();
      if (attempt >= opts.attempts || !opts.retryable(err)) throw err;
      await opts.onRetry?.(err, attempt);
      await sleep((opts.backoffMs ?? 200) * 2 ** (attempt - 1), { signal: opts.signal });
    }
  }
}
