import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { constants, enableCompileCache, getCompileCacheDir } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { gzipSync } from 'node:zlib';
import { unpackInWorker } from '../../../oci/image/unpack-pool.js';
import { tarball } from '../../support/test-images.js';

const sha256 = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

test('an unpack worker compiles through the compile cache the daemon keeps, and writes what it compiled there', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'minicri-worker-cache-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // As server/main.ts does for the daemon. This process writes its own entries only at its exit.
  const { status } = enableCompileCache(join(dir, 'cache'));
  assert.equal(status, constants.compileCacheStatus.ENABLED, 'NODE_COMPILE_CACHE and NODE_DISABLE_COMPILE_CACHE must be unset for this test');
  const cache = getCompileCacheDir();
  assert.ok(cache);
  assert.deepEqual(readdirSync(cache), []);

  const tar = await tarball([{ name: 'f', data: randomBytes(256 << 10) }]);
  const gz = gzipSync(tar);
  const result = await unpackInWorker(Readable.from([gz]), join(dir, 'layer'), 'layer', { digest: sha256(gz), size: gz.length });
  assert.equal(result.diffId, sha256(tar));

  // The worker keeps its entries in a directory of its own below the daemon's.
  const written = readdirSync(cache, { recursive: true, withFileTypes: true }).filter((e) => e.isFile());
  assert.ok(written.length > 0, 'the worker wrote its compiled modules into the cache');
});
