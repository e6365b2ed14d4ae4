// zstd decompression as a stream: Node's own zstd where it has one (22.15 and later, what setup.sh installs on a
// stock node), in-process on the unpack worker's thread; on an older Node the zstd tool, one process per zstd
// layer. Both keep to zstd's 128 MiB window limit and to the reader's pace, so a small layer that inflates to
// gigabytes neither blocks a thread nor fills memory; a pure-JS decoder (fzstd) did both.
import type { Duplex } from 'node:stream';
import * as zlib from 'node:zlib';
import { execa } from 'execa';

const zlibZstd = (zlib as { createZstdDecompress?: (o?: zlib.ZlibOptions) => Duplex }).createZstdDecompress;

export function zstdDecompress(): Duplex {
  // 64 KiB output pieces, as for gzip: under the daemon's malloc mmap threshold (see file-sink.ts).
  return zlibZstd ? zlibZstd({ chunkSize: 64 << 10 }) : execa('zstd', ['-dcq'], { buffer: false }).duplex();
}
