import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Mutex, Semaphore, SingleFlight } from '../../../core/locks.js';

const tick = () => new Promise((r) => setImmediate(r));

test('single-flight shares one run per key, and runs again once it is done', async () => {
  const sf = new SingleFlight<number>();
  let runs = 0;
  const work = async () => { runs++; await tick(); return runs; };
  const [a, b] = await Promise.all([sf.do('k', work), sf.do('k', work)]);
  assert.deepEqual([a, b, runs], [1, 1, 1]);
  assert.equal(await sf.do('k', work), 2);
  await assert.rejects(sf.do('e', async () => { throw new Error('boom'); }), /boom/);
  assert.equal(await sf.do('e', async () => 7), 7, 'a failure is not cached');
});

test('semaphore bounds parallel work', async () => {
  const sem = new Semaphore(2);
  let inside = 0;
  let peak = 0;
  await Promise.all(Array.from({ length: 6 }, () => sem.run(async () => {
    inside++;
    peak = Math.max(peak, inside);
    await tick();
    inside--;
  })));
  assert.equal(peak, 2);
});

test('mutex runs sections one at a time and survives failures', async () => {
  const m = new Mutex();
  const order: string[] = [];
  const a = m.lock(async () => { order.push('a1'); await tick(); order.push('a2'); });
  const b = m.lock(() => { throw new Error('b'); });
  const c = m.lock(() => { order.push('c'); });
  await a;
  await assert.rejects(b, /b/);
  await c;
  assert.deepEqual(order, ['a1', 'a2', 'c']);
});

test('single-flight: one caller giving up leaves the run to the others; the last one stops it and waits for it', async () => {
  const sf = new SingleFlight<string>();
  let aborted = false;
  let settled = false;
  const work = (signal: AbortSignal) => new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => resolve('done'), 50);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      aborted = true;
      setImmediate(() => { settled = true; reject(signal.reason); });
    });
  });
  const a = new AbortController();
  const pa = sf.do('k', work, a.signal);
  const pb = sf.do('k', work);
  a.abort(new Error('client a gone'));
  await assert.rejects(pa, /client a gone/);
  assert.equal(await pb, 'done', 'the other caller still gets the result');
  assert.equal(aborted, false);

  const c = new AbortController();
  const pc = sf.do('j', work, c.signal);
  await tick();
  c.abort(new Error('client c gone'));
  await assert.rejects(pc, /client c gone/);
  assert.ok(aborted && settled, 'the run was aborted and had settled before the last caller was answered');
});

test('semaphore: a waiter whose signal aborts leaves the queue', async () => {
  const sem = new Semaphore(1);
  let release!: () => void;
  const holder = sem.run(() => new Promise<void>((r) => { release = r; }));
  const ctl = new AbortController();
  const waiting = sem.run(async () => 'ran', ctl.signal);
  ctl.abort(new Error('gone'));
  await assert.rejects(waiting, /gone/);
  release();
  await holder;
  assert.equal(await sem.run(async () => 'next'), 'next');
});
