import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Mutex, Semaphore, SingleFlight } from '../../../oci/image/flight.js';

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
