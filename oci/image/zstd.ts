// zstd decompression as a stream: Node's own zstd where it has one (22.15 and later, what setup.sh installs on a
// stock node), in-process on the unpack worker's thread; on an older Node the zstd tool, one process per zstd
// layer. Both keep to zstd's 128 MiB window limit and to the reader's pace, so a small layer that inflates to
// gigabytes neither blocks a thread nor fills memory; a pure-JS decoder (fzstd) did both.
import type { Duplex } from 'node:stream';
import * as zlib from 'node:zlib';

const zlibZstd = (zlib as { createZstdDecompress?: (o?: zlib.ZlibOptions) => Duplex }).createZstdDecompress;

/** Node's decoder at once, or (execa loaded on first use, as an unpack worker rarely needs it) the tool's. */
export function zstdDecompress(): Duplex | Promise<Duplex> {
  // 64 KiB output pieces, as for gzip: under the daemon's malloc mmap threshold (see file-sink.ts).
  if (zlibZstd) return zlibZstd({ chunkSize: 64 << 10 });
  return import('execa').then(({ execa }) => execa('zstd', ['-dcq'], { buffer: false }).duplex());
}
