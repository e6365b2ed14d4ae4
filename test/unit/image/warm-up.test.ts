// The daemon's warm-up of its pull path (oci/image/warm-up.ts): made-up layers, fetched over loopback through
// the registry client, unpacked by the workers and checked like a pull's, and nothing left of them.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import tar from 'tar-stream';
import { undiciTransport, type Transport } from '../../../oci/image/http.js';
import { warmUpBlob, warmUpBlobId, warmUpTar, WARM_UP_LAYERS, type WarmUpLayer } from '../../../oci/image/warm-up.js';
import { imageEnv } from '../../support/image-env.js';

const sha256 = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;
const SHAPE: WarmUpLayer = { smallFiles: 3, smallBytes: 100, bigFiles: 2, bigBytes: 300 << 10 };

test('a warm-up layer is a gzip of a tar of zeros, and its id is that of the bytes served, every time', async () => {
  const blob = await buffer(warmUpBlob(1, SHAPE));
  const id = await warmUpBlobId(1, SHAPE);
  assert.deepEqual(id, { digest: sha256(blob), size: blob.length, diffId: sha256(gunzipSync(blob)) });
  assert.deepEqual(await buffer(warmUpBlob(1, SHAPE)), blob, 'the same bytes at every call');
  assert.ok(blob.length > 2 * SHAPE.bigBytes, 'stored, not compressed: the bytes cross the socket at full size');
  assert.notEqual((await warmUpBlobId(0, SHAPE)).digest, id.digest, 'each layer its own blob');

  const entries: Array<[string, number, boolean]> = [];
  const extract = tar.extract();
  extract.on('entry', (h, body, next) => {
    void buffer(body).then((data) => { entries.push([h.name, data.length, data.every((b) => b === 0)]); next(); });
  });
  const tarBytes = await buffer(warmUpTar(1, SHAPE));
  await new Promise<void>((resolve, reject) => { extract.on('finish', resolve).on('error', reject); extract.end(tarBytes); });
  assert.deepEqual(entries, [
    ...[0, 1, 2].map((i) => [`warm-up/1/small/${i}`, 100, true]),
    ...[0, 1].map((i) => [`warm-up/1/big/${i}`, 300 << 10, true]),
  ]);
});

test('the daemon\'s warm-up is two layers of about 32 MB in all, one per unpack worker', () => {
  assert.equal(WARM_UP_LAYERS.length, 2);
  const bytes = WARM_UP_LAYERS.reduce((a, l) => a + l.smallFiles * l.smallBytes + l.bigFiles * l.bigBytes, 0);
  assert.ok(bytes >= 32 << 20 && bytes < 34 << 20, `${bytes} bytes`);
});

async function storeIsEmpty(rootDir: string): Promise<void> {
  assert.deepEqual(await readdir(join(rootDir, 'tmp')), [], 'tmp is as it was');
  for (const dir of ['layers', 'blobs']) {
    const files = (await readdir(join(rootDir, dir), { recursive: true, withFileTypes: true }).catch(() => [])).filter((e) => !e.isDirectory());
    assert.deepEqual(files.map((f) => f.name), [], `${dir} holds nothing of the warm-up`);
  }
}

test('a warm-up pulls its image through the registry client from a registry of its own, and records and leaves nothing', async (t) => {
  const { images, rootDir, requests } = await imageEnv(t);
  await images.warmUp();
  assert.deepEqual(requests.map((u) => u.replace(/[0-9a-f]{64}/, 'H')).sort(), [
    'http://localhost/v2/minicri/warm-up/blobs/sha256:H', 'http://localhost/v2/minicri/warm-up/blobs/sha256:H',
    'http://localhost/v2/minicri/warm-up/blobs/sha256:H', 'http://localhost/v2/minicri/warm-up/manifests/latest',
  ], 'its manifest, config and two layers, and nothing else');
  assert.deepEqual(images.list(), [], 'no image recorded');
  assert.equal(images.stats.bytes, 0, 'nor counted as the node\'s pulls');
  await storeIsEmpty(rootDir);
});

test('the warm-up registry is a Unix socket in a directory only root may enter, gone after', async (t) => {
  const { images, rootDir } = await imageEnv(t, undefined, {
    transport: async (url, init) => {
      const [dir] = await readdir(join(rootDir, 'tmp'));
      const st = await stat(join(rootDir, 'tmp', dir!));
      assert.equal(st.mode & 0o777, 0o700);
      assert.ok((await stat(join(rootDir, 'tmp', dir!, 'registry.sock'))).isSocket());
      return undiciTransport(url, init);
    },
  });
  await images.warmUp();
  await storeIsEmpty(rootDir);
});

/** An Images whose transport flips one byte of every blob body past its first MiB. */
function corrupting(): Transport {
  return async (url, init) => {
    const res = await undiciTransport(url, init);
    let seen = 0;
    const flip = new Transform({
      transform(chunk: Buffer, _e, done) {
        const copy = Buffer.from(chunk);
        if (seen <= 1 << 20 && seen + copy.length > 1 << 20) copy[(1 << 20) - seen]! ^= 0xff;
        seen += copy.length;
        done(null, copy);
      },
    });
    return { ...res, body: res.body.pipe(flip) as Readable };
  };
}

test('a warm-up whose bytes come back changed fails on the digest check, and leaves nothing', async (t) => {
  const { images, rootDir } = await imageEnv(t, undefined, { transport: corrupting() });
  await assert.rejects(images.warmUp(), /layer sha256:[0-9a-f]{64} of "localhost\/minicri\/warm-up:latest" .* has digest sha256:[0-9a-f]{64}, not sha256:/);
  await storeIsEmpty(rootDir);
});

test('a warm-up cut off by its signal stops, for that reason, and leaves nothing', async (t) => {
  const reason = new Error('daemon stopping');
  const before = await imageEnv(t);
  await assert.rejects(before.images.warmUp(AbortSignal.abort(reason)), (e) => e === reason);
  await storeIsEmpty(before.rootDir);

  // Cut off once a layer's answer is in (the manifest and config are small): its bytes are under way.
  const stop = new AbortController();
  const { images, rootDir } = await imageEnv(t, undefined, {
    transport: async (url, init) => {
      const res = await undiciTransport(url, init);
      if (Number(res.headers.get('content-length')) > 1 << 20) stop.abort(reason);
      return res;
    },
  });
  await assert.rejects(images.warmUp(stop.signal), /daemon stopping/);
  await storeIsEmpty(rootDir);
});
