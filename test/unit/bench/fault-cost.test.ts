// The bench's reading of page faults: 64 MiB written the first time, and again after a spawn, fault on its pages.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { faultCost } from '../../../bench/lib/fault-cost.js';

test('writing fresh memory, and memory a fork made copy-on-write, takes a fault per page, each with a cost', () => {
  const cost = faultCost();
  // 16 384 pages of 4 KiB; fewer where the kernel maps huge pages (transparent_hugepage=always).
  for (const [what, pages] of Object.entries(cost.pages)) assert.ok(pages > 0 && pages <= 16_384 + 1024, `${what}: ${pages} faults`);
  // Copy-on-write after the fork: the pages fault again, as many as the first time (fewer only by chance).
  assert.ok(cost.pages.afterFork >= cost.pages.fresh / 2, `${cost.pages.afterFork} faults after the fork, ${cost.pages.fresh} the first time`);
  for (const [what, us] of Object.entries(cost.usPerFault)) assert.ok(us > 0 && Number.isFinite(us), `${what}: ${us} µs a fault`);
});
