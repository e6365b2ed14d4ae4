// Work that can wait and the calls it waits for: when calls count as quiet, the cap on the wait, and
// Background's `later` starting its work only then (or at once when drained).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Background } from '../../../core/background.js';
import { CallQuiet } from '../../../core/call-quiet.js';
import { silentLogger } from '../../../core/log.js';

describe('CallQuiet', () => {
  it('is quiet once no call is under way and the last ended quietMs ago', () => {
    let now = 1000;
    const calls = new CallQuiet({ quietMs: 20, now: () => now });
    assert.equal(calls.untilQuietMs(), 0, 'no call yet');
    calls.begin();
    now += 100;
    assert.equal(calls.untilQuietMs(), 20, 'a call under way, however long');
    calls.begin();
    calls.end();
    assert.equal(calls.untilQuietMs(), 20, 'another still under way');
    now += 5;
    calls.end();
    now += 15;
    assert.equal(calls.untilQuietMs(), 5);
    now += 5;
    assert.equal(calls.untilQuietMs(), 0);
  });

  it('resolves at once when quiet, after the calls stop (every waiter), and after maxWaitMs when they never do', async () => {
    const calls = new CallQuiet({ quietMs: 10, maxWaitMs: 200 });
    let resolved = false;
    await calls.quiet();
    calls.begin();
    const waiting = Promise.all([calls.quiet(), calls.quiet()]).then(() => { resolved = true; });
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(resolved, false, 'a call is under way');
    calls.end();
    await waiting;
    // A waiter that came after the others had gone waits anew.
    calls.begin();
    calls.end();
    await calls.quiet();
    // A call that never ends: the wait gives up.
    calls.begin();
    await calls.quiet();
    calls.end();
  });
});

describe('Background.later', () => {
  it('starts its work once quiet resolves, and at once when drained', async () => {
    let open!: () => void;
    const gate = new Promise<void>((r) => { open = r; });
    const background = new Background(silentLogger, () => gate);
    const ran: string[] = [];
    background.later('first', async () => { ran.push('first'); });
    background.run('now', async () => { ran.push('now'); });
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(ran, ['now'], 'later waits for quiet');
    open();
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(ran, ['now', 'first']);

    const closed = new Background(silentLogger, () => new Promise<void>(() => undefined));
    closed.later('held', async () => { ran.push('held'); });
    await closed.drain();
    assert.deepEqual(ran, ['now', 'first', 'held'], 'drain does not wait for quiet');
  });
});
