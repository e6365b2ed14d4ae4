// When the daemon warms up its pull path (oci/image/warm-up.ts): after a start's recovery and sweep, a few
// seconds on, and only once no operation and no pull is under way, so it does not hold up kubelet's first
// calls after a restart. A pull that comes while it runs shares the workers and download slots with it.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../core/log.js';
import { freedMemoryKeptUpTo } from '../core/malloc-trim.js';

const AFTER_MS = 5000;
const RECHECK_MS = 1000;

export interface PullWarmUpOptions {
  /** Settles once the start's recovery is over. */
  ready: Promise<unknown>;
  /** Whether an operation or a pull is under way. */
  busy: () => boolean;
  warmUp: (signal: AbortSignal) => Promise<void>;
  log: Logger;
  afterMs?: number;
}

export interface PullWarmUp {
  /** Settles when the warm-up has run (or failed, or was stopped). */
  readonly done: Promise<void>;
  /** Stops it wherever it is and waits for that. */
  stop(): Promise<void>;
}

export function warmUpPullsWhenQuiet(opts: PullWarmUpOptions): PullWarmUp {
  const abort = new AbortController();
  const { signal } = abort;
  const done = (async () => {
    await opts.ready.catch(() => undefined);
    await sleep(opts.afterMs ?? AFTER_MS, undefined, { signal, ref: false });
    while (opts.busy()) await sleep(RECHECK_MS, undefined, { signal, ref: false });
    const started = performance.now();
    await opts.warmUp(signal);
    // What free() may keep at each arena's top from now on (keepUnpackWorkers): the setting a pull's faults hang on.
    opts.log.info({ ms: Math.round(performance.now() - started), trimThreshold: freedMemoryKeptUpTo() }, 'pull path warmed up');
  })().catch((err: unknown) => {
    if (signal.aborted) return;
    opts.log.warn({ err: (err as Error).message }, 'warming up the pull path failed: pulls work, only the first runs slower');
  });
  return {
    done,
    async stop() {
      abort.abort();
      await done;
    },
  };
}
