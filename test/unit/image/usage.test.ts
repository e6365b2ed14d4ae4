// The usage walk of writable layers goes in steps (a stop condition ends a step after any entry, the next step
// goes on from there, and the sum is that of a whole walk), and the cache answers a value within its lifetime
// without walking again.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, linkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { diskUsage, MAX_LINKED_INODES, UsageCache, UsageWalk } from '../../../oci/image/usage.js';

const FILES = 20_000;
const DIRS = 100;
let root: string;

before(() => {
  root = mkdtempSync(join(tmpdir(), 'minicri-usage-'));
  for (let d = 0; d < DIRS; d++) {
    const dir = join(root, `d${d}`);
    mkdirSync(dir);
    for (let f = 0; f < FILES / DIRS; f++) writeFileSync(join(dir, `f${f}`), 'x');
  }
  // A hard link counts once.
  linkSync(join(root, 'd0', 'f0'), join(root, 'link'));
});
after(() => rmSync(root, { recursive: true, force: true }));

/** Stops after `n` more entries. */
const entries = (n: number) => { let left = n; return () => --left <= 0; };

test('the walk goes in steps of the budget it is given and sums what one whole walk does', async () => {
  const whole = await diskUsage(root);
  assert.equal(whole.inodes, 1 + DIRS + FILES, 'the root, its directories and files, the link once');
  assert.ok(whole.bytes > 0);

  const walk = new UsageWalk(root);
  let steps = 0;
  let usage;
  while (!(usage = await walk.step(entries(1000)))) {
    steps++;
    assert.equal(walk.done, false);
    // One step looks at no more entries than its budget (and the root, first).
    assert.ok(walk.visited <= steps * 1000 + 1, `${walk.visited} entries after ${steps} steps`);
  }
  assert.ok(steps >= FILES / 1000, `${steps} steps`);
  assert.deepEqual(usage, whole);
});

test('the cache answers within its lifetime without walking, then walks again; an unfinished walk leaves the last value', async () => {
  let now = 0;
  let budget = 1_000_000;
  let walked = 0;
  const cache = new UsageCache({ maxAgeMs: 10_000, now: () => now, budget: () => { const stop = entries(budget); return () => { walked++; return stop(); }; } });
  const first = await cache.get(root);
  assert.equal(first?.inodes, 1 + DIRS + FILES);
  const walkedOnce = walked;

  writeFileSync(join(root, 'new'), 'y');
  now += 9_999;
  assert.deepEqual(await cache.get(root), first, 'within its lifetime: the cached value');
  assert.equal(walked, walkedOnce, 'and no entry looked at');

  now += 2;
  budget = 500;
  assert.deepEqual(await cache.get(root), first, 'an unfinished walk answers the last value');
  assert.ok(walked - walkedOnce <= 500, 'one call walks no more than its budget');
  let fresh;
  for (let calls = 0; calls < 100 && (fresh = await cache.get(root))?.inodes === first!.inodes; calls++);
  assert.equal(fresh?.inodes, first!.inodes + 1, 'the walk went on call by call to the new file');
  rmSync(join(root, 'new'));
});

test('before its first walk ends the cache has no value to answer', async () => {
  let budget = 10;
  const cache = new UsageCache({ budget: () => entries(budget) });
  assert.equal(await cache.get(root), undefined);
  budget = Infinity;
  assert.equal((await cache.get(root))?.inodes, 1 + DIRS + FILES, 'the walk ends at a later call');
});

test('hard-linked inodes are remembered up to a bound, and past it counted at every link', async () => {
  const tree = mkdtempSync(join(tmpdir(), 'minicri-usage-'));
  try {
    // Three files of two links each.
    for (const name of ['a', 'b', 'c']) {
      writeFileSync(join(tree, name), name);
      linkSync(join(tree, name), join(tree, `${name}2`));
    }
    assert.equal((await new UsageWalk(tree).step(() => false))!.inodes, 1 + 3, 'each counted once');
    assert.equal((await new UsageWalk(tree, 2).step(() => false))!.inodes, 1 + 2 + 2, 'the third at both its links');
    assert.equal(MAX_LINKED_INODES, 100_000);
  } finally {
    rmSync(tree, { recursive: true, force: true });
  }
});
