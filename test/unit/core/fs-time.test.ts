import assert from 'node:assert/strict';
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { exists } from '../../../core/fs.js';
import { MAX_TIMER_MS, settledWithin, sleep, timerDelay } from '../../../core/time.js';

test('exists: a file or directory is there, a missing path and a dangling link are not', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'minicri-exists-'));
  try {
    await symlink(join(dir, 'nowhere'), join(dir, 'dangling'));
    assert.equal(await exists(dir), true);
    assert.equal(await exists(join(dir, 'missing')), false);
    assert.equal(await exists(join(dir, 'dangling')), false);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('sleep resolves, and rejects with the reason when its signal aborts', async () => {
  assert.equal(await sleep(1, { unref: true }), undefined);
  const ctl = new AbortController();
  const waiting = sleep(60_000, { signal: ctl.signal });
  ctl.abort(new Error('gone'));
  await assert.rejects(waiting, /gone/);
});

test('timerDelay keeps a deadline weeks away a long wait: Node fires a longer timer at once or throws', () => {
  const month = 31 * 24 * 3600 * 1000;
  assert.equal(timerDelay(month), MAX_TIMER_MS);
  assert.equal(timerDelay(2 ** 40), MAX_TIMER_MS);
  assert.equal(timerDelay(-5), 0);
  assert.equal(timerDelay(1500), 1500);
  const signal = AbortSignal.timeout(timerDelay(2 ** 40));
  assert.equal(signal.aborted, false);
  assert.throws(() => AbortSignal.timeout(2 ** 40), RangeError, 'what the clamp avoids');
});

test('settledWithin: ends with the work, failed or not, or when the time is up, and leaves no timer behind', async () => {
  const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
  const before = timers();
  let done = false;
  let t0 = Date.now();
  await settledWithin(sleep(5).then(() => { done = true; }), 60_000);
  assert.equal(done, true, 'it waited for the work');
  assert.ok(Date.now() - t0 < 10_000, 'and no longer');
  assert.equal(timers(), before, 'the 60 s timer went with the wait');

  t0 = Date.now();
  await settledWithin(Promise.reject(new Error('cleanup failed')), 60_000);
  assert.ok(Date.now() - t0 < 10_000, 'a failed work ends the wait too');
  assert.equal(timers(), before);

  let hung = false;
  t0 = Date.now();
  await settledWithin(new Promise(() => undefined), 30).then(() => { hung = true; });
  assert.equal(hung, true, 'a hung work is given up on after its time');
  assert.ok(Date.now() - t0 < 10_000, 'within its time, not for ever');
});
