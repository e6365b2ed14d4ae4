// The check both decoders of layers (Node's streams and the workers' in-place one) must pass: a small input that
// inflates to far more is decoded only as fast as it is read.
import assert from 'node:assert/strict';
import type { Duplex } from 'node:stream';

/**
 * Writes `bomb` (compressed zeros) to `d` with nothing reading and checks that `d` decoded at most `maxBuffered`
 * bytes and did not take the input; then reads `pieces` pieces, all zeros. Resolves with the bytes read.
 */
export async function decodesAtReadersPace(d: Duplex, bomb: Buffer, maxBuffered: number, pieces: number): Promise<number> {
  let taken = false;
  d.write(bomb, () => { taken = true; });
  await new Promise((r) => setImmediate(r));
  await new Promise((r) => setImmediate(r));
  assert.ok(d.readableLength <= maxBuffered, `nothing reads, yet ${d.readableLength} bytes were decoded`);
  assert.equal(taken, false, 'the input is not taken before its output is read');
  let n = 0;
  let read = 0;
  for await (const piece of d) {
    assert.ok((piece as Buffer).every((b) => b === 0));
    n += (piece as Buffer).length;
    if (++read === pieces) break;
  }
  return n;
}
