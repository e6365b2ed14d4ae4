import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { test } from 'node:test';
import { createGunzip, gunzipSync, gzipSync } from 'node:zlib';
import { execa } from 'execa';
import { decompressesInThread } from '../../../oci/image/decompress-in-thread.js';
import { zstdDecompress } from '../../../oci/image/zstd.js';
import { decodesAtReadersPace } from '../../support/decoder-pace.js';
import { inPlaceStream } from '../../support/in-place-stream.js';

const PIECE = 128 << 10;
const gunzipInPlace = () => inPlaceStream(createGunzip(), PIECE);

/** Feeds `data` in pieces of `piece` bytes, so headers and blocks are split across writes. */
const decode = (data: Buffer, piece: number) => {
  const pieces = [];
  for (let i = 0; i < data.length; i += piece) pieces.push(data.subarray(i, i + piece));
  return buffer(Readable.from(pieces).pipe(gunzipInPlace()));
};

test('this Node offers the synchronous call the unpack workers decompress with, for gzip and zstd', () => {
  // Checked here so that a Node that drops it fails the suite, rather than the workers quietly using the pool.
  assert.equal(decompressesInThread(createGunzip()), true);
  assert.equal(decompressesInThread(zstdDecompress()), true);
});

test('gzip in place: members one after another, zero padding after them, whatever the piece size, as gunzip makes', async () => {
  const a = Buffer.from('layer text\n'.repeat(50_000));
  const b = randomBytes(400_000);
  const blob = Buffer.concat([gzipSync(a), gzipSync(b, { level: 9 }), Buffer.alloc(1024)]);
  assert.deepEqual(gunzipSync(blob), Buffer.concat([a, b]));
  for (const piece of [7, 65536, blob.length]) {
    assert.deepEqual(await decode(blob, piece), Buffer.concat([a, b]), `pieces of ${piece}`);
  }
});

test('gzip in place: a cut-off stream, a corrupt one and junk after a member fail, as gunzip does', async () => {
  const gz = gzipSync(randomBytes(300_000));
  await assert.rejects(decode(gz.subarray(0, gz.length - 10), 4096), /unexpected end of file/);
  const corrupt = Buffer.from(gz);
  corrupt.fill(0xff, 1000, 1100);
  await assert.rejects(decode(corrupt, 4096), { code: 'Z_DATA_ERROR' });
  await assert.rejects(decode(Buffer.concat([gz, Buffer.from('junk after the member')]), 4096), /incorrect header check/);
  await assert.rejects(decode(Buffer.from('not gzip at all, only text'), 8), /incorrect header check/);
});

test('gzip in place: output comes only as fast as it is read, however far the input inflates', async () => {
  // 256 MiB of zeros: a few hundred KiB of gzip.
  const bomb = (await execa('sh', ['-c', 'head -c 268435456 /dev/zero | gzip -1 -c'], { encoding: 'buffer' })).stdout as Buffer;
  assert.equal(await decodesAtReadersPace(gunzipInPlace(), bomb, 2 * PIECE, 64), 64 * PIECE);
});

test('gzip in place: all of a big stream comes out once read to its end, and destroying it midway stops it', async () => {
  const data = randomBytes(3 << 20);
  assert.deepEqual(await decode(gzipSync(data), 100_000), data);
  const gunzip = createGunzip();
  const d = inPlaceStream(gunzip, PIECE);
  d.write(gzipSync(Buffer.alloc(8 << 20)));
  let after = 0;
  d.destroy();
  d.on('data', (c: Buffer) => { after += c.length; });
  await new Promise((r) => d.once('close', r));
  await new Promise((r) => setImmediate(r));
  assert.equal(after, 0, 'nothing is made once destroyed');
  assert.equal((gunzip as unknown as { _handle: unknown })._handle, null, 'the native inflater is released');
});

test('gzip in place: the stream ends where zlib takes no more input (zeros after a member), whatever follows', async () => {
  const a = randomBytes(200_000);
  const gz = gzipSync(a);
  const tails = [Buffer.concat([Buffer.alloc(512), Buffer.from('garbage')]), Buffer.concat([Buffer.alloc(512), gzipSync(Buffer.from('more'))])];
  for (const tail of tails) {
    for (const piece of [7, 4096, gz.length, gz.length + 100]) {
      assert.deepEqual(await decode(Buffer.concat([gz, tail]), piece), a, `pieces of ${piece}`);
    }
  }
});

test('gzip in place: a piece that inflates to hundreds of MiB lets the event loop turn while it does', async () => {
  const bomb = (await execa('sh', ['-c', 'head -c 268435456 /dev/zero | gzip -1 -c'], { encoding: 'buffer' })).stdout as Buffer;
  let turns = 0;
  let ticking = true;
  const tick = () => { turns++; if (ticking) setImmediate(tick); };
  setImmediate(tick);
  let n = 0;
  const d = gunzipInPlace();
  d.end(bomb);
  for await (const piece of d) n += (piece as Buffer).length;
  ticking = false;
  assert.equal(n, 256 << 20);
  // One turn at least per 8 MiB made; without yielding, the loop would not turn until the piece was used up.
  assert.ok(turns >= 16, `the event loop turned ${turns} times while 256 MiB were inflated from one piece`);
});
