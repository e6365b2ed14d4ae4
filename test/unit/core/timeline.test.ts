import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Timeline } from '../../../core/timeline.js';

test('steps run side by side are each timed from their own start; marks close the run since the last one', async (t) => {
  // A clock the test moves by hand.
  let now = 1000;
  t.mock.method(performance, 'now', () => now);
  const timeline = new Timeline();
  let release!: () => void;
  const slow = timeline.step('slow', () => new Promise<void>((resolve) => { release = resolve; }));
  now += 5;
  await timeline.step('quick', () => { now += 2; });
  now += 10;
  release();
  await slow;
  now += 3;
  timeline.mark('after');
  timeline.add({ step: 'cni-add', plugin: 'bridge', network: 'pods', ms: 1.234 });
  assert.deepEqual(timeline.entries, [
    { step: 'quick', ms: 2 },
    { step: 'slow', ms: 17 },
    { step: 'after', ms: 3 },
    { step: 'cni-add', plugin: 'bridge', network: 'pods', ms: 1.2 },
  ]);
  assert.deepEqual(timeline.ms, { quick: 2, slow: 17, after: 3, 'cni-add:bridge': 1.2 });
  await assert.rejects(timeline.step('failing', () => { now += 4; throw new Error('no'); }), /no/);
  assert.deepEqual(timeline.entries.at(-1), { step: 'failing', ms: 4 }, 'a failed step is timed too');
});
