import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KeyedLock } from '../../../core/locks.js';
import { silentLogger } from '../../../core/log.js';
import { inParallel, withUndo } from '../../../core/undo.js';

describe('undo', () => {
  it('unwinds in reverse, keeps going past a failing undo, and rethrows the first error', async () => {
    const order: string[] = [];
    await assert.rejects(withUndo(silentLogger, async (undo) => {
      undo.push('a', () => { order.push('a'); });
      undo.push('b', () => { throw new Error('b broke'); });
      undo.push('c', async () => { order.push('c'); });
      throw new Error('step d failed');
    }), /step d failed/);
    assert.deepEqual(order, ['c', 'a']);
  });

  it('runs no undo when the body succeeds', async () => {
    let undone = false;
    assert.equal(await withUndo(silentLogger, async (undo) => { undo.push('x', () => { undone = true; }); return 7; }), 7);
    assert.equal(undone, false);
  });
});

describe('keyed lock', () => {
  it('serializes one key and lets other keys run alongside', async () => {
    const lock = new KeyedLock();
    const events: string[] = [];
    const slow = (key: string, name: string, ms: number) => lock.run(key, async () => {
      events.push(`${name}+`);
      await new Promise((r) => setTimeout(r, ms));
      events.push(`${name}-`);
    });
    await Promise.all([slow('p', 'a', 30), slow('p', 'b', 1), slow('q', 'c', 5)]);
    assert.ok(events.indexOf('a-') < events.indexOf('b+'), events.join(' '));
    assert.ok(events.indexOf('c-') < events.indexOf('a-'), events.join(' '));
  });

  it('releases the key when the body throws', async () => {
    const lock = new KeyedLock();
    await assert.rejects(lock.run('k', async () => { throw new Error('boom'); }));
    assert.equal(await lock.run('k', async () => 1), 1);
  });
});

describe('inParallel', () => {
  it('waits for every step before throwing the first failure', async () => {
    let slowDone = false;
    await assert.rejects(inParallel([
      Promise.reject(new Error('fast failure')),
      new Promise<void>((r) => setTimeout(() => { slowDone = true; r(); }, 30)),
    ]), /fast failure/);
    assert.equal(slowDone, true, 'the slow step finished before the error surfaced');
  });

  it('returns the results in order, plain values included', async () => {
    assert.deepEqual(await inParallel([Promise.resolve(1), 'two', undefined]), [1, 'two', undefined]);
  });
});

describe('undo of the record', () => {
  it('keeps the record when an undo after it failed, and removes it when all succeeded', async () => {
    const run = async (failing: boolean) => {
      let recordRemoved = false;
      await assert.rejects(withUndo(silentLogger, async (undo) => {
        undo.pushRecord('record', () => { recordRemoved = true; });
        undo.push('netns', () => { if (failing) throw new Error('umount: busy'); });
        throw new Error('step failed');
      }), /step failed/);
      return recordRemoved;
    };
    assert.equal(await run(true), false, 'the record stays to explain the netns left behind');
    assert.equal(await run(false), true);
  });
});
