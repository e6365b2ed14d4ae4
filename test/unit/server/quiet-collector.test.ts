import assert from 'node:assert/strict';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, it, mock } from 'node:test';
import { silentLogger } from '../../../core/log.js';
import { collectAndCompact, quietCollector } from '../../../server/quiet-collector.js';

const MiB = 2 ** 20;

describe('quiet collector', () => {
  it('collects a quiet period after the last of a burst of changes, when idle (or once idle) and the heap has grown by half since the last time', async () => {
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      let heap = 40 * MiB;
      let busy = false;
      let collections = 0;
      const collector = quietCollector(silentLogger, { collect: async () => { collections++; heap = 20 * MiB; }, quietMs: 1000, heapBytes: () => heap, busy: () => busy });
      const quietPeriod = async () => { mock.timers.tick(1000); await nextTurn(); };

      collector.changed();
      mock.timers.tick(600);
      collector.changed();
      mock.timers.tick(999);
      assert.equal(collections, 0, 'each change restarts the wait');
      await quietPeriod();
      assert.equal(collections, 1, 'the first quiet moment collects');
      await quietPeriod();
      assert.equal(collections, 1, 'nothing more without a change');

      heap = 29 * MiB;
      collector.changed();
      await quietPeriod();
      assert.equal(collections, 1, 'under 1.5x the 20 MiB left by the last collection');

      heap = 30 * MiB;
      busy = true;
      collector.changed();
      await quietPeriod();
      assert.equal(collections, 1, 'not while an operation is under way');
      await quietPeriod();
      assert.equal(collections, 1, 'nor a quiet period later if it still is');
      busy = false;
      await quietPeriod();
      assert.equal(collections, 2, 'once it is over, without another change');
      await quietPeriod();
      assert.equal(collections, 2);
    } finally {
      mock.timers.reset();
    }
  });

  it('survives a failed collection and collects again later', async () => {
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      let attempts = 0;
      const collector = quietCollector(silentLogger, { collect: async () => { attempts++; throw new Error('no inspector'); }, quietMs: 10, busy: () => false });
      collector.changed();
      mock.timers.tick(10);
      await nextTurn();
      collector.changed();
      mock.timers.tick(10);
      await nextTurn();
      assert.equal(attempts, 2);
    } finally {
      mock.timers.reset();
    }
  });

  it('gives back the pages of garbage spread among live objects', async () => {
    // Live objects scattered over the old generation: a collection alone keeps their pages committed.
    const live: object[] = [];
    let all: object[] | null = [];
    for (let i = 0; i < 300_000; i++) {
      const o = { i, s: `item ${i}`, a: [i] };
      all.push(o);
      if (i % 50 === 0) live.push(o);
    }
    all = null;
    const before = process.memoryUsage().heapTotal;
    await collectAndCompact();
    const after = process.memoryUsage().heapTotal;
    assert.ok(after < before / 2, `heap ${before >> 20} MiB → ${after >> 20} MiB`);
    assert.equal(live.length, 6000);
  });
});
