import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Readable, type Duplex } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { test } from 'node:test';
import { execa } from 'execa';
import { zstdDecompress } from '../../../oci/image/zstd.js';
import { decodesAtReadersPace } from '../../support/decoder-pace.js';
import { inPlaceStream } from '../../support/in-place-stream.js';

const zstd = async (input: Buffer, ...args: string[]) => (await execa('zstd', ['-c', '-q', ...args], { input, encoding: 'buffer' })).stdout as Buffer;

/** The two ways layers are decoded: Node's stream (libuv's pool), and in place on an unpack worker's thread. */
const DECODERS = [
  { how: 'stream', make: () => zstdDecompress() },
  { how: 'in place', make: () => inPlaceStream(zstdDecompress(), 128 << 10) },
];

/** Feeds `data` in pieces of `piece` bytes, so frame and block headers are split across writes. */
const decodeWith = (make: () => Duplex) => (data: Buffer, piece: number) => {
  const pieces = [];
  for (let i = 0; i < data.length; i += piece) pieces.push(data.subarray(i, i + piece));
  return buffer(Readable.from(pieces).pipe(make()));
};

// A skippable frame (magic 0x184D2A50..5F, then a 4-byte length), as zstd:chunked layers carry their index in.
const skippable = Buffer.concat([Buffer.from([0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0]), Buffer.from('meta')]);

for (const { how, make } of DECODERS) {
  const decode = decodeWith(make);

  test(`zstd (${how}): concatenated and skippable frames decode, whatever the piece size`, async () => {
    const a = Buffer.from('layer part one\n'.repeat(1000));
    const b = randomBytes(300_000);
    const blob = Buffer.concat([await zstd(a), skippable, await zstd(b, '-19')]);
    for (const piece of [7, 65536, blob.length]) {
      assert.deepEqual(await decode(blob, piece), Buffer.concat([a, b]), `pieces of ${piece}`);
    }
  });

  test(`zstd (${how}): a cut-off stream, a foreign one, and a frame asking for a window over 128 MiB all fail`, async () => {
    const blob = await zstd(randomBytes(200_000));
    await assert.rejects(decode(blob.subarray(0, blob.length - 10), 4096));
    await assert.rejects(decode(Buffer.from('not a zstd stream at all, just text'), 8));
    // From stdin zstd does not know the size, so the frame keeps the 2 GiB window --long=31 asks for.
    const huge = (await execa('sh', ['-c', 'head -c 4096 /dev/zero | zstd -q -c --long=31 -'], { encoding: 'buffer' })).stdout as Buffer;
    await assert.rejects(decode(huge, 4096), { code: 'ZSTD_error_frameParameter_windowTooLarge' });
  });

  test(`zstd (${how}): output comes only as fast as it is read, however far the input inflates`, async () => {
    // 1 GiB of zeros: a few dozen KiB of zstd.
    const bomb = (await execa('sh', ['-c', 'head -c 1073741824 /dev/zero | zstd -q -c -'], { encoding: 'buffer' })).stdout as Buffer;
    const n = await decodesAtReadersPace(make(), bomb, 256 << 10, 64);
    assert.ok(n > 0 && n <= 64 * (128 << 10), `${n} bytes in 64 pieces`);
  });
}
