// zstd decompression as a stream, in-process: Node's own zstd where it has one (22.15 and later, what setup.sh
// installs on a stock node), else fzstd, a pure-JS decoder. Either runs on the unpack worker's thread, so no
// layer costs a process and none blocks the thread serving CRI calls.
import { Transform, type Duplex } from 'node:stream';
import * as zlib from 'node:zlib';
import { Decompress } from 'fzstd';

const zlibZstd = (zlib as { createZstdDecompress?: (o?: zlib.ZlibOptions) => Duplex }).createZstdDecompress;

/** fzstd's stream decoder as a Transform: concatenated and skippable frames pass, a cut-off frame fails at the end. */
export function pureZstdDecompress(): Transform {
  const out = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      try {
        decoder.push(chunk);
        cb();
      } catch (err) {
        cb(zstdError(err));
      }
    },
    flush(cb) {
      try {
        decoder.push(new Uint8Array(0), true);
        cb();
      } catch (err) {
        cb(zstdError(err));
      }
    },
  });
  const decoder = new Decompress((data) => { if (data.length > 0) out.push(data); });
  return out;
}

function zstdError(err: unknown): Error {
  return new Error(`zstd: ${(err as Error).message}`, { cause: err });
}

export function zstdDecompress(): Duplex {
  // 64 KiB output pieces, as for gzip: under the daemon's malloc mmap threshold (see file-sink.ts).
  return zlibZstd ? zlibZstd({ chunkSize: 64 << 10 }) : pureZstdDecompress();
}
