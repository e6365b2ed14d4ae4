import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { gzipSync } from 'node:zlib';
import { execa } from 'execa';
import { InvalidArgument } from '../../../core/errors.js';
import { LayerFeed } from '../../../oci/image/layer-feed.js';
import { tarball } from '../../support/test-images.js';

const sha256 = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

function scratch(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'minicri-feed-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function pieces(data: Buffer, size: number): Buffer[] {
  const out = [];
  for (let i = 0; i < data.length; i += size) out.push(data.subarray(i, i + size));
  return out;
}

/** Pieces of `size`, each the whole of its own memory, as the socket's pieces are once moved to the worker. */
function own(data: Buffer, size: number): Buffer[] {
  return pieces(data, size).map((p) => { const u = new Uint8Array(p); return Buffer.from(u.buffer, 0, u.byteLength); });
}

/** Hands `blob` over in pieces of `size` as the worker does (each freed once taken, where it may be); then ends. */
async function feed(f: LayerFeed, blob: Buffer, size: number) {
  await f.takePieces(own(blob, size));
  return f.end();
}

test('a layer fed in pieces of any size unpacks, with the diff id of its tar and the blob kept and checked', async (t) => {
  const dir = scratch(t);
  const big = randomBytes(3 << 20);
  const tar = await tarball([{ name: 'etc/', type: 'directory' }, { name: 'etc/os', data: 'feed\n' }, { name: 'big', data: big }]);
  const gz = gzipSync(tar);
  for (const size of [1000, 65536, gz.length]) {
    const dest = join(dir, `l${size}`);
    const f = await LayerFeed.open(dest, 'layer', { digest: sha256(gz), size: gz.length, tmp: join(dir, `blob${size}`) });
    assert.deepEqual(await feed(f, gz, size), { diffId: sha256(tar), bytes: tar.length }, `pieces of ${size}`);
    assert.equal(readFileSync(join(dest, 'etc/os'), 'utf8'), 'feed\n');
    assert.deepEqual(readFileSync(join(dest, 'big')), big);
    assert.deepEqual(readFileSync(join(dir, `blob${size}`)), gz, 'the blob file holds the bytes as they came');
  }
  // An uncompressed layer is its own tar.
  const f = await LayerFeed.open(join(dir, 'plain'), 'layer', { digest: sha256(tar), size: tar.length });
  assert.deepEqual(await feed(f, tar, 4096), { diffId: sha256(tar), bytes: tar.length });
});

test('the format is told from the first bytes however the network splits them: gzip, zstd and plain tar', async (t) => {
  const dir = scratch(t);
  const tar = await tarball([{ name: 'f', data: randomBytes(100_000) }]);
  const zst = (await execa('zstd', ['-q', '-c'], { input: tar, encoding: 'buffer' })).stdout as Buffer;
  for (const [format, blob] of [['gzip', gzipSync(tar)], ['zstd', zst], ['tar', tar]] as const) {
    for (const head of [1, 2, 3]) {
      // The first `head` bytes come one at a time, the rest in one piece.
      const f = await LayerFeed.open(join(dir, `${format}${head}`), 'layer', { digest: sha256(blob), size: blob.length });
      const given = [...own(blob.subarray(0, head), 1), ...own(blob.subarray(head), blob.length)];
      await f.takePieces(given);
      assert.deepEqual(await f.end(), { diffId: sha256(tar), bytes: tar.length }, `${format}, first ${head} bytes alone`);
      // The first bytes are held until the format is told; the piece that tells it is inflated and freed.
      assert.deepEqual(given.map((p) => p.buffer.byteLength === 0), [...Array<boolean>(head).fill(false), format !== 'tar'], `${format}, ${head}`);
    }
  }
});

test('the data ends with its gzip member: zeros and junk after it are only checked as the blob\'s', async (t) => {
  const dir = scratch(t);
  const tar = await tarball([{ name: 'a', data: randomBytes(200_000) }]);
  const blob = Buffer.concat([gzipSync(tar), Buffer.alloc(512), Buffer.from('junk')]);
  const f = await LayerFeed.open(join(dir, 'l'), 'layer', { digest: sha256(blob), size: blob.length });
  assert.deepEqual(await feed(f, blob, 7000), { diffId: sha256(tar), bytes: tar.length });
  const wrong = await LayerFeed.open(join(dir, 'w'), 'layer', { digest: sha256(Buffer.from('other')), size: blob.length });
  await assert.rejects(feed(wrong, blob, 7000), /has digest sha256:[0-9a-f]{64}, not/);
});

test('a blob that is not what it claims fails as such, even when its layer is broken too', async (t) => {
  const dir = scratch(t);
  const junk = randomBytes(300_000);
  const tmp = join(dir, 'blob');
  // Not a tar, and not the declared digest: the digest says more (a corrupt download, not a bad image).
  const f = await LayerFeed.open(join(dir, 'l'), 'layer', { digest: sha256(Buffer.from('x')), size: junk.length, tmp });
  await assert.rejects(feed(f, junk, 65536), /has digest .* the registry serves corrupt content/);
  // More bytes than declared fail at the piece that goes over.
  const tar = await tarball([{ name: 'a', data: 'x' }]);
  const over = await LayerFeed.open(join(dir, 'o'), 'layer', { digest: sha256(tar), size: 100 });
  await assert.rejects(feed(over, tar, 64), /larger than its declared 100 bytes/);
  // Right digest, broken tar: the layer's own failure.
  const cut = gzipSync(tar).subarray(0, 20);
  const bad = await LayerFeed.open(join(dir, 'b'), 'layer', { digest: sha256(cut), size: cut.length });
  await assert.rejects(feed(bad, cut, 5), (e: Error) => e instanceof InvalidArgument && /layer cannot be unpacked/.test(e.message));
});

test('an entry refused while pieces wait on the tar parser: every piece is answered and the layer fails with the entry', async (t) => {
  const dir = scratch(t);
  // The refused hardlink comes first, then megabytes the parser cannot take once its reader stopped.
  const tar = await tarball([{ name: 'hl', type: 'link', linkname: 'missing' }, { name: 'big', data: randomBytes(8 << 20) }]);
  const gz = gzipSync(tar, { level: 1 });
  const f = await LayerFeed.open(join(dir, 'l'), 'layer', { digest: sha256(gz), size: gz.length });
  await assert.rejects(feed(f, gz, 65536), (e: Error) => e instanceof InvalidArgument && /does not name a file earlier in the layer/.test(e.message));
});

test('an abort while a piece waits on the tar parser lets it go, and the layer fails with the abort\'s reason', async (t) => {
  const dir = scratch(t);
  const tar = await tarball([{ name: 'big', data: Buffer.alloc(64 << 20) }]);
  const gz = gzipSync(tar);
  const f = await LayerFeed.open(join(dir, 'l'), 'layer', { digest: sha256(gz), size: gz.length });
  // One piece inflating to 64 MiB: it waits on the parser (and on the event loop's turns) long before its end.
  const writing = f.takePieces(own(gz, gz.length));
  await new Promise((r) => setImmediate(r));
  f.abort(new Error('the download stalled'));
  await writing;
  await assert.rejects(f.end(), /the download stalled/);
  const made = statSync(join(dir, 'l', 'big'), { throwIfNoEntry: false })?.size ?? 0;
  assert.ok(made < 64 << 20, `the inflating stopped midway: ${made} bytes written`);
});

test('takePieces frees what a compressed layer has inflated at once, never a piece that anything still holds', async (t) => {
  const dir = scratch(t);
  const big = randomBytes(1 << 20);
  const tar = await tarball([{ name: 'etc/os', data: 'freed\n' }, { name: 'big', data: big }]);
  const gz = gzipSync(tar);
  const freed = (ps: Buffer[]) => ps.filter((p) => p.buffer.byteLength === 0).length;
  const unpack = async (name: string, blob: Buffer, ps: Buffer[], keep: boolean) => {
    const dest = join(dir, name);
    const f = await LayerFeed.open(dest, name, { digest: sha256(blob), size: blob.length, ...(keep ? { tmp: join(dir, `${name}.blob`) } : {}) });
    await f.takePieces(ps);
    assert.deepEqual(await f.end(), { diffId: sha256(tar), bytes: tar.length }, name);
    assert.deepEqual(readFileSync(join(dest, 'big')), big, name);
    assert.equal(readFileSync(join(dest, 'etc/os'), 'utf8'), 'freed\n', name);
  };

  const gzPieces = own(gz, 65536);
  await unpack('gzip', gz, gzPieces, false);
  assert.equal(freed(gzPieces), gzPieces.length, 'every inflated piece was freed');
  const zst = (await execa('zstd', ['-q', '-c'], { input: tar, encoding: 'buffer' })).stdout as Buffer;
  const zstPieces = own(zst, 65536);
  await unpack('zstd', zst, zstPieces, false);
  assert.equal(freed(zstPieces), zstPieces.length);

  // The tar parser may hold a plain layer's bytes, and the blob's file batches its pieces before writing.
  const tarPieces = own(tar, 65536);
  await unpack('plain', tar, tarPieces, false);
  assert.equal(freed(tarPieces), 0);
  const keptPieces = own(gz, 65536);
  await unpack('kept', gz, keptPieces, true);
  assert.equal(freed(keptPieces), 0);
  assert.deepEqual(readFileSync(join(dir, 'kept.blob')), gz);

  // Views into a larger buffer (other views see the same memory) stay as they are.
  const views = pieces(gz, 65536);
  await unpack('views', gz, views, false);
  assert.equal(freed(views), 0);
  assert.equal(sha256(gz), sha256(Buffer.concat(views)));
});
