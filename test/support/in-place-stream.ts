// The unpack workers' in-place decompressor as a stream, so the decoder tests can read it as they read Node's own
// (piped, async-iterated, destroyed midway) and check both against the same expectations.
import { Duplex } from 'node:stream';
import type * as zlib from 'node:zlib';
import { InPlaceDecompressor } from '../../oci/image/decompress-in-thread.js';

export function inPlaceStream(stream: zlib.Gunzip | zlib.ZstdDecompress, piece: number): Duplex {
  const d = new InPlaceDecompressor(stream, piece);
  let reading: (() => void) | undefined;
  let over = false;
  const end = () => {
    if (!over) duplex.push(null);
    over = true;
  };
  const take = (p: Buffer) => (duplex.push(p) ? undefined : new Promise<void>((resolve) => { reading = resolve; }));
  const duplex = new Duplex({
    write(chunk: Buffer, _enc, cb) {
      d.write(chunk, take).then(() => { if (d.ended) end(); cb(); }, cb);
    },
    final(cb) {
      d.finish(take).then(() => { end(); cb(); }, cb);
    },
    read() {
      const r = reading;
      reading = undefined;
      r?.();
    },
    destroy(err, cb) {
      d.close();
      reading?.();
      cb(err);
    },
  });
  return duplex;
}
