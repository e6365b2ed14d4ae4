// zstd decompression as a stream, in-process on the unpack worker's thread: Node's own zstd where it has one
// (22.15 and later, what setup.sh installs on a stock node), else libzstd through a small addon of ours
// (zstd-native/, built by scripts/build-native.sh on such a Node). Both keep to zstd's 128 MiB window limit and
// to the reader's pace, so a small layer that inflates to gigabytes neither blocks a thread nor fills memory.
import { createRequire } from 'node:module';
import { Duplex } from 'node:stream';
import * as zlib from 'node:zlib';

const zlibZstd = (zlib as { createZstdDecompress?: (o?: zlib.ZlibOptions) => Duplex }).createZstdDecompress;

interface ZstdSteps {
  open(): object;
  /** Decodes from input[offset..] into output: [input bytes taken, output bytes made, 0 when a frame just ended]. */
  step(handle: object, input: Buffer, offset: number, output: Buffer): [number, number, number];
}

/** 64 KiB output pieces, as for gzip: under the daemon's malloc mmap threshold (see file-sink.ts). */
const PIECE = 64 << 10;
const NOTHING = Buffer.alloc(0);

let steps: ZstdSteps | undefined;
function addon(): ZstdSteps {
  steps ??= createRequire(import.meta.url)('../../zstd/zstd-stream.node') as ZstdSteps;
  return steps;
}

/** libzstd a piece at a time: it decodes only while the reader wants more, and each write waits until it is taken. */
class SteppedZstd extends Duplex {
  private readonly handle: object;
  private input: Buffer = NOTHING;
  private offset = 0;
  private written: ((err?: Error | null) => void) | undefined;
  private finished: ((err?: Error | null) => void) | undefined;
  /** The reader wants more (set by _read, cleared when push says its buffer is full). */
  private wanted = false;
  /** The last step filled its output: more may be waiting inside libzstd with no input. */
  private full = false;
  /** What libzstd's last step said: 0 at a frame's end. */
  private left = 0;

  constructor(private readonly zstd: ZstdSteps) {
    super();
    this.handle = zstd.open();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.input = chunk;
    this.offset = 0;
    this.written = cb;
    this.pump();
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.finished = cb;
    this.pump();
  }

  override _read(): void {
    this.wanted = true;
    this.pump();
  }

  private pump(): void {
    while (this.offset < this.input.length || this.full) {
      if (!this.wanted) return;
      const out = Buffer.allocUnsafe(PIECE);
      let taken: number, made: number;
      try {
        [taken, made, this.left] = this.zstd.step(this.handle, this.input, this.offset, out);
      } catch (err) {
        this.destroy(new Error(`zstd: ${(err as Error).message}`));
        return;
      }
      this.offset += taken;
      this.full = made === PIECE;
      if (made > 0) this.wanted = this.push(out.subarray(0, made));
    }
    const written = this.written;
    this.written = undefined;
    this.input = NOTHING;
    written?.();
    const finished = this.finished;
    if (!finished) return;
    this.finished = undefined;
    if (this.left !== 0) return finished(new Error('zstd: the stream ends inside a frame'));
    this.push(null);
    finished();
  }
}

export function zstdDecompress(): Duplex {
  return zlibZstd ? zlibZstd({ chunkSize: PIECE }) : new SteppedZstd(addon());
}
