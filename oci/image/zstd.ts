// zstd decompression as a stream, by Node's own zstd (in libuv's pool, or in place on an unpack worker: see
// decompress-in-thread.ts). It keeps to a 128 MiB window (a frame asking for more fails) and to the reader's pace
// (a write is taken only once its output has been read), so a small layer that inflates to gigabytes neither
// blocks a thread nor fills memory.
import * as zlib from 'node:zlib';

/** 64 KiB output pieces: under the daemon's malloc mmap threshold (see file-sink.ts). */
const PIECE = 64 << 10;
/** 2^27 bytes: the 128 MiB window zstd's format asks every decoder to support, and no more. */
const WINDOW_LOG_MAX = 27;

export function zstdDecompress(): zlib.ZstdDecompress {
  return zlib.createZstdDecompress({ chunkSize: PIECE, params: { [zlib.constants.ZSTD_d_windowLogMax]: WINDOW_LOG_MAX } });
}
