import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { keepFreedMemoryUpTo, loadMallocTrim, returnFreedMemory } from '../../../core/malloc-trim.js';
import { rssBytes } from '../../support/rss.js';

const rssMiB = () => rssBytes() / (1 << 20);

test('the built addon loads, and memory freed in the middle of malloc\'s heap goes back to the system', async () => {
  assert.equal(loadMallocTrim(), undefined, 'npm run build makes dist/native/malloc-trim.node');
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  // 128 MiB in blocks under glibc's mmap threshold, from its heap; one in ten kept, so the free space between
  // them cannot go back from the heap's top, the only place free() returns memory from.
  let blocks: Buffer[] | undefined = Array.from({ length: 2048 }, () => Buffer.alloc(64 << 10, 1));
  const kept = blocks.filter((_, i) => i % 10 === 0);
  blocks = undefined;
  // The blocks' memory is freed once the collector has swept their buffers, which may finish after gc() returns.
  gc();
  await new Promise((r) => setTimeout(r, 100));
  gc();
  const before = rssMiB();
  assert.equal(returnFreedMemory(), true, 'malloc_trim released something');
  const after = rssMiB();
  assert.ok(before - after > 64, `RSS went from ${before.toFixed(0)} to ${after.toFixed(0)} MiB`);
  assert.equal(kept.length, 205);
});

test('the trim threshold is set through the addon, and a count glibc cannot take is refused', () => {
  try {
    assert.equal(keepFreedMemoryUpTo(16 << 20), true);
    assert.equal(keepFreedMemoryUpTo(128 << 10), true);
  } finally {
    keepFreedMemoryUpTo(128 << 10);
  }
  for (const bad of [-1, 2 ** 31, 0.5, Number.NaN, Number.POSITIVE_INFINITY]) assert.throws(() => keepFreedMemoryUpTo(bad), RangeError, String(bad));
  assert.throws(() => keepFreedMemoryUpTo('1' as unknown as number), TypeError);
});
