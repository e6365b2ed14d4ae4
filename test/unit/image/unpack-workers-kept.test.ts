// An unpack worker ends after five idle minutes, its thread with it; once the daemon keeps its workers (after
// its warm-up), one stays however long it idles, and the next layer is unpacked on it; one that parsed a big
// document still ends soon.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { gzipSync } from 'node:zlib';
import { keepUnpackWorkers, parseOffThread, trimWhenIdle, unpackInWorker, warmUnpackWorkers } from '../../../oci/image/unpack-pool.js';
import { freedMemoryKeptUpTo, loadMallocTrim } from '../../../core/malloc-trim.js';
import { tarball } from '../../support/test-images.js';

const threads = () => readdirSync('/proc/self/task').length;

/** Waits on the event loop alone (the timers are mocked) until `done()` or `ms` of real time pass. */
async function spin(ms: number, done: () => boolean = () => false): Promise<void> {
  const end = performance.now() + ms;
  while (!done() && performance.now() < end) await new Promise((r) => setImmediate(r));
}

test('an idle unpack worker ends after five minutes, unless the daemon keeps its workers', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'minicri-kept-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // Past the size unpacked on the main thread.
  const layer = gzipSync(await tarball([{ name: 'f', data: Buffer.alloc(512 << 10, 7) }]), { level: 0 });
  let n = 0;
  const unpack = () => unpackInWorker(Readable.from([Buffer.from(layer)]), join(dir, `l${n++}`), 'layer');
  t.mock.timers.enable({ apis: ['setTimeout'] });

  await unpack();
  const withWorker = threads();
  t.mock.timers.tick(5 * 60_000 + 1);
  await spin(10_000, () => threads() < withWorker);
  const without = threads();
  assert.ok(without < withWorker, `the idle worker's thread ended (${withWorker} threads before, ${without} after)`);

  assert.equal(loadMallocTrim(), undefined, 'the malloc-trim addon loads (npm run build makes it)');
  assert.equal(freedMemoryKeptUpTo(), undefined, 'free() trims as glibc does until the workers are kept');
  keepUnpackWorkers();
  // Nor does free() hand their memory back piece by piece from then on: the memory-after-pull test shows what
  // that costs a pull, but on a busy machine too close to what pulls fault anyway to tell the two apart there.
  assert.equal(freedMemoryKeptUpTo(), 16 << 20, 'the top of each arena may hold a third of the kept pull memory');
  await unpack();
  const kept = threads();
  assert.ok(kept > without, 'a worker started for the layer');
  t.mock.timers.tick(60 * 60_000);
  await spin(1000);
  assert.equal(threads(), kept, 'an hour idle, the worker is still there');
  assert.ok((await unpack()).bytes > 0);
  assert.equal(threads(), kept, 'and unpacks the next layer');

  // A worker that parsed a big document may hold its megabytes of garbage: it ends five seconds on, kept or not,
  // even once a pull has had it ready for its layers since.
  await parseOffThread({ kind: 'config', bytes: bigConfig(), what: 'a big config' });
  warmUnpackWorkers(1);
  t.mock.timers.tick(5001);
  await spin(10_000, () => threads() < kept);
  assert.ok(threads() < kept, 'the worker that parsed ended');
});

/** A config of about 1 MiB: parsed on a worker. */
function bigConfig(): Buffer {
  return Buffer.from(JSON.stringify({
    architecture: 'amd64', os: 'linux', config: { Env: Array.from({ length: 50_000 }, (_, i) => `VAR_${i}=value`) },
    rootfs: { type: 'layers', diff_ids: [`sha256:${'a'.repeat(64)}`] },
  }));
}

test('kept workers keep their pulls\' memory only up to a bound above the daemon\'s size when they were kept', () => {
  const from = 150 << 20;
  assert.equal(trimWhenIdle(false, from, from), true, 'not kept: always given back');
  assert.equal(trimWhenIdle(true, from + (40 << 20), from), false);
  assert.equal(trimWhenIdle(true, from + (48 << 20), from), false);
  assert.equal(trimWhenIdle(true, from + (49 << 20), from), true, 'past the bound: given back');
});
