// The event hub alone: every subscriber gets every event in order; one that lags past the bound is cut
// off (and only it), its queue dropped; leaving and closing end subscriptions with their reason.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EventHub, type Subscription } from '../../../pod/event-hub.js';

/** Everything a subscription hands out until it ends. */
async function drain<T>(s: Subscription<T>): Promise<T[]> {
  const got: T[] = [];
  for (let e = await s.next(); e !== undefined; e = await s.next()) got.push(e);
  return got;
}

describe('event hub', () => {
  it('gives each subscriber every event published after it subscribed, in order', async () => {
    const hub = new EventHub<number>(100);
    hub.publish(0);
    const a = hub.subscribe();
    const b = hub.subscribe();
    assert.equal(hub.listening, true);
    // One waits for its next event before any is published, the other reads only afterwards.
    const first = a.next();
    for (let i = 1; i <= 50; i++) hub.publish(i);
    assert.equal(await first, 1);
    hub.close();
    assert.deepEqual(await drain(a), [], 'events still queued are not handed out after the end');
    assert.equal(a.ended, 'closed');
    assert.equal(b.ended, 'closed');
    assert.equal(await b.done, 'closed');
  });

  it('hands out queued events in order while the subscription lives', async () => {
    const hub = new EventHub<number>(100);
    const a = hub.subscribe();
    for (let i = 0; i < 10; i++) hub.publish(i);
    const got: number[] = [];
    for (let i = 0; i < 10; i++) got.push((await a.next())!);
    assert.deepEqual(got, [...Array(10).keys()]);
  });

  it('cuts off a subscriber that lags past the bound, dropping its queue, while the others keep receiving', async () => {
    const hub = new EventHub<number>(4);
    const slow = hub.subscribe();
    const fast = hub.subscribe();
    const received: number[] = [];
    const reading = (async () => { for (let e = await fast.next(); e !== undefined; e = await fast.next()) received.push(e); })();
    for (let i = 0; i < 4; i++) hub.publish(i);
    assert.equal(slow.ended, undefined, 'a queue at the bound is still within it');
    await new Promise((r) => setImmediate(r));
    hub.publish(4);
    assert.equal(slow.ended, 'overflow');
    assert.equal(await slow.done, 'overflow');
    assert.equal(await slow.next(), undefined);
    for (let i = 5; i < 20; i++) {
      hub.publish(i);
      await new Promise((r) => setImmediate(r));
    }
    hub.close();
    await reading;
    assert.deepEqual(received, [...Array(20).keys()], 'the subscriber that keeps up gets every event');
  });

  it('forgets a subscriber that left, and one that subscribes after close is ended at once', async () => {
    const hub = new EventHub<number>(2);
    const a = hub.subscribe();
    const waiting = a.next();
    a.unsubscribe();
    assert.equal(await waiting, undefined, 'a wait in progress ends with the subscription');
    assert.equal(a.ended, 'unsubscribed');
    assert.equal(hub.listening, false);
    for (let i = 0; i < 10; i++) hub.publish(i); // nobody to queue for: no overflow, no growth
    hub.close();
    const late = hub.subscribe();
    assert.equal(late.ended, 'closed');
    assert.equal(await late.next(), undefined);
  });

  it('refuses a bound that is not a positive integer', () => {
    assert.throws(() => new EventHub(0), /positive integer/);
  });
});
