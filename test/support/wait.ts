// Waiting for what the daemon finishes in the background: a bound that only keeps a broken run from hanging.

/** Polls until `fn` returns true (or throws after `ms`). */
export async function waitFor(fn: () => Promise<boolean>, ms = 5000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await fn()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out after ${ms}ms waiting for ${what}`);
}
