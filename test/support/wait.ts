// Waiting for what the daemon finishes in the background: a bound that only keeps a broken run from hanging.
import assert from 'node:assert/strict';
import { sleep } from '../../core/time.js';

/** Polls until `fn` returns true (or throws after `ms`). */
export async function waitFor(fn: () => Promise<boolean>, ms = 5000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await fn()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out after ${ms}ms waiting for ${what}`);
}

/** Polls `probe` until it gives a value and returns it; failing after `ms` (a liveness bound, not a timing claim). */
export async function until<T>(what: string, probe: () => Promise<T | undefined | false>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value) return value;
    assert.ok(Date.now() < deadline, `${what}: not within ${ms / 1000} s`);
    await sleep(200);
  }
}
