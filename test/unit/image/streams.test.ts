import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { test } from 'node:test';
import { gzipSync } from 'node:zlib';
import { FileSink, writeFileInPlace } from '../../../oci/image/file-sink.js';
import { Decompress } from '../../../oci/image/unpack.js';

const collect = async (r: Readable) => { const out: Buffer[] = []; for await (const c of r) out.push(c as Buffer); return Buffer.concat(out); };

test('FileSink writes every piece, in order, batched or not, and refuses an existing file', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'minicri-sink-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const pieces = Array.from({ length: 70 }, (_, i) => randomBytes(20_000 + i));
  await pipeline(Readable.from(pieces), new FileSink(join(dir, 'f')));
  assert.deepEqual(readFileSync(join(dir, 'f')), Buffer.concat(pieces));
  await pipeline(Readable.from([]), new FileSink(join(dir, 'empty')));
  assert.equal(readFileSync(join(dir, 'empty')).length, 0);
  await assert.rejects(pipeline(Readable.from([Buffer.from('x')]), new FileSink(join(dir, 'f'))), /EEXIST/);
});

test('writeFileInPlace writes every piece, in order, across its batches, and refuses an existing file', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'minicri-sink-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const pieces = Array.from({ length: 130 }, (_, i) => randomBytes(20_000 + i));
  await writeFileInPlace(join(dir, 'f'), Readable.from(pieces));
  assert.deepEqual(readFileSync(join(dir, 'f')), Buffer.concat(pieces));
  await writeFileInPlace(join(dir, 'empty'), Readable.from([]));
  assert.equal(readFileSync(join(dir, 'empty')).length, 0);
  await assert.rejects(writeFileInPlace(join(dir, 'f'), Readable.from([Buffer.from('x')])), /EEXIST/);
  assert.deepEqual(readFileSync(join(dir, 'f')), Buffer.concat(pieces));
});

test('Decompress tells gzip from plain data by its first bytes, whatever the chunking', async () => {
  const data = randomBytes(300_000);
  const gz = gzipSync(data);
  const chunks = (b: Buffer) => Array.from({ length: Math.ceil(b.length / 7000) }, (_, i) => b.subarray(i * 7000, (i + 1) * 7000));
  assert.deepEqual(await collect(Readable.from(chunks(gz)).pipe(new Decompress())), data);
  assert.deepEqual(await collect(Readable.from(chunks(data)).pipe(new Decompress())), data);
  assert.equal((await collect(Readable.from([]).pipe(new Decompress()))).length, 0);
  // The first bytes split over chunks (a slow network): still told apart.
  const split = (b: Buffer) => [b.subarray(0, 1), b.subarray(1, 2), b.subarray(2, 3), b.subarray(3)];
  assert.deepEqual(await collect(Readable.from(split(gz)).pipe(new Decompress())), data);
  assert.deepEqual(await collect(Readable.from(split(data)).pipe(new Decompress())), data);
  assert.deepEqual(await collect(Readable.from([data.subarray(0, 3)]).pipe(new Decompress())), data.subarray(0, 3), 'shorter than any mark');
  await assert.rejects(collect(Readable.from([gz.subarray(0, gz.length - 10)]).pipe(new Decompress())), /unexpected end of file/);
});
