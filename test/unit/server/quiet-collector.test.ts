import assert from 'node:assert/strict';
import { describe, it, mock } from 'node:test';
import { silentLogger } from '../../../server/log.js';
import { collectAndCompact, quietCollector } from '../../../server/quiet-collector.js';

describe('quiet collector', () => {
  it('collects once, a quiet period after the last of a burst of changes', () => {
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      let collections = 0;
      const collector = quietCollector(silentLogger, async () => { collections++; }, 1000);
      collector.changed();
      mock.timers.tick(600);
      collector.changed();
      mock.timers.tick(600);
      collector.changed();
      mock.timers.tick(999);
      assert.equal(collections, 0, 'each change restarts the wait');
      mock.timers.tick(1);
      assert.equal(collections, 1);
      mock.timers.tick(5000);
      assert.equal(collections, 1, 'nothing more without a change');
      collector.changed();
      mock.timers.tick(1000);
      assert.equal(collections, 2);
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
