// An unpack worker ends after five idle minutes, its thread with it; once the daemon keeps its workers (after
// its warm-up), one stays however long it idles, and the next layer is unpacked on it.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { gzipSync } from 'node:zlib';
import { keepUnpackWorkers, unpackInWorker } from '../../../oci/image/unpack-pool.js';
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

  keepUnpackWorkers();
  await unpack();
  const kept = threads();
  assert.ok(kept > without, 'a worker started for the layer');
  t.mock.timers.tick(60 * 60_000);
  await spin(1000);
  assert.equal(threads(), kept, 'an hour idle, the worker is still there');
  assert.deepEqual((await unpack()).bytes > 0, true);
  assert.equal(threads(), kept, 'and unpacks the next layer');
});
