// When the daemon warms up its pull path: after recovery, a while after it, never beside an operation or a pull,
// once; a failure is a warning, and a stop ends it wherever it is.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { pino } from 'pino';
import { warmUpPullsWhenQuiet } from '../../../server/pull-warm-up.js';

function capture() {
  const lines: Array<{ level: number; msg: string; err?: string }> = [];
  const log = pino({ level: 'info' }, new Writable({ write(chunk: Buffer, _e, done) { lines.push(JSON.parse(chunk.toString())); done(); } }));
  return { log, lines };
}

test('it waits for recovery, then for no operation under way, and runs once', async () => {
  const { log, lines } = capture();
  let recovered!: () => void;
  const ready = new Promise<void>((resolve) => { recovered = resolve; });
  let busy = true;
  const runs: AbortSignal[] = [];
  const warm = warmUpPullsWhenQuiet({ ready, busy: () => busy, warmUp: async (signal) => { runs.push(signal); }, log, afterMs: 10 });
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(runs.length, 0, 'not before recovery is over');
  recovered();
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(runs.length, 0, 'not while an operation runs');
  busy = false;
  await warm.done;
  assert.equal(runs.length, 1);
  assert.equal(runs[0]!.aborted, false);
  assert.ok(lines.some((l) => l.msg === 'pull path warmed up'), JSON.stringify(lines));
  await warm.stop();
  assert.equal(runs.length, 1, 'once');
});

test('a recovery that failed still lets it run', async () => {
  const { log } = capture();
  let runs = 0;
  const warm = warmUpPullsWhenQuiet({ ready: Promise.reject(new Error('sweep failed')), busy: () => false, warmUp: async () => { runs++; }, log, afterMs: 1 });
  await warm.done;
  assert.equal(runs, 1);
});

test('a failure is a warning that names it, and nothing throws', async () => {
  const { log, lines } = capture();
  const warm = warmUpPullsWhenQuiet({ ready: Promise.resolve(), busy: () => false, warmUp: async () => { throw new Error('no loopback'); }, log, afterMs: 1 });
  await warm.done;
  const warning = lines.find((l) => l.level === 40);
  assert.match(warning?.msg ?? '', /warming up the pull path failed/);
  assert.equal(warning?.err, 'no loopback');
});

test('stopped before it runs, it never runs; stopped while it runs, its signal aborts and nothing is logged', async () => {
  const { log, lines } = capture();
  let runs = 0;
  const early = warmUpPullsWhenQuiet({ ready: Promise.resolve(), busy: () => false, warmUp: async () => { runs++; }, log, afterMs: 60_000 });
  await early.stop();
  assert.equal(runs, 0);

  let started!: () => void;
  const running = new Promise<void>((resolve) => { started = resolve; });
  let seen: AbortSignal | undefined;
  const late = warmUpPullsWhenQuiet({
    ready: Promise.resolve(), busy: () => false, log, afterMs: 1,
    warmUp: (signal) => new Promise((_resolve, reject) => {
      seen = signal;
      started();
      signal.addEventListener('abort', () => reject(signal.reason), { once: true });
    }),
  });
  await running;
  await late.stop();
  assert.equal(seen?.aborted, true);
  assert.deepEqual(lines, [], 'a stop is not a failure');
});
