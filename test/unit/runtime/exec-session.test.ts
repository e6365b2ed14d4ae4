// Terminal resizes reaching a session's process: coalesced to the newest, applied one at a time.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { TerminalSizes, type TerminalSize } from '../../../core/stdio.js';
import { applyResizes } from '../../../oci/runtime/exec-session.js';

/** An apply that takes a turn of the event loop per size, as a pipe write or a fifo open does. */
function recorder(): { applied: TerminalSize[]; inFlight: () => number; apply: (s: TerminalSize) => Promise<void>; idle: () => Promise<void> } {
  const applied: TerminalSize[] = [];
  let active = 0;
  let maxActive = 0;
  return {
    applied,
    inFlight: () => maxActive,
    apply: async (s) => {
      active++;
      maxActive = Math.max(maxActive, active);
      applied.push(s);
      await tick();
      active--;
    },
    idle: async () => { for (let i = 0; i < 100 && active > 0; i++) await tick(); await tick(); },
  };
}

describe('applyResizes', () => {
  it('applies 10,000 sizes delivered at once at most twice, one at a time, the last being the newest', async () => {
    const sizes = new TerminalSizes();
    const r = recorder();
    const unfollow = applyResizes(sizes, r.apply);
    for (let i = 1; i <= 10_000; i++) sizes.push({ width: i, height: i });
    await r.idle();
    assert.ok(r.applied.length <= 2, `applied ${r.applied.length} times`);
    assert.deepEqual(r.applied.at(-1), { width: 10_000, height: 10_000 });
    assert.equal(r.inFlight(), 1);
    // Later sizes are still applied once the flood is over.
    sizes.push({ width: 80, height: 24 });
    await r.idle();
    assert.deepEqual(r.applied.at(-1), { width: 80, height: 24 });
    unfollow();
    sizes.push({ width: 1, height: 1 });
    await r.idle();
    assert.deepEqual(r.applied.at(-1), { width: 80, height: 24 });
  });

  it('applies the size the client sent before the process was there', async () => {
    const sizes = new TerminalSizes();
    sizes.push({ width: 120, height: 40 });
    const r = recorder();
    applyResizes(sizes, r.apply)();
    await r.idle();
    assert.deepEqual(r.applied, [{ width: 120, height: 40 }]);
  });
});
