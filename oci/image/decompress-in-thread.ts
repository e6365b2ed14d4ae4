// gunzip and zstd on the calling thread, for the unpack workers. Node's decompression streams run each piece in
// libuv's thread pool and call back: for a 100 MB layer that is hundreds of wake-ups of a pool thread and of
// the worker, whose scheduling cost (in a VM above all) came to more CPU than the inflating itself. A worker is
// a thread of its own, so it decompresses in place with the same library, through the synchronous call Node's
// gunzipSync makes, keeping to its reader's pace: more output is made only once the last was taken, so a small
// layer that inflates to gigabytes fills no memory. It is not a stream: its caller (layer-feed.ts) hands each
// piece on with a plain call, where each stream between the steps of a layer cost CPU of its own.
import type * as zlib from 'node:zlib';

/** What Node's synchronous one-shot functions use of a decompression stream: its native handle and flush flags. */
interface Native {
  _handle?: {
    writeSync(flush: number, input: Uint8Array, inOff: number, inLen: number, out: Uint8Array, outOff: number, outLen: number): void;
  } | null;
  /** After each call: output room left, input left. */
  _writeState?: Uint32Array;
  _defaultFlushFlag?: number;
  _finishFlushFlag?: number;
}

type Decompressor = (zlib.Gunzip | zlib.ZstdDecompress) & Native;

/** Takes one piece of output; more is made only once what it returns has settled. */
export type TakePiece = (piece: Buffer) => void | Promise<void>;

const EMPTY = new Uint8Array(0);

/**
 * Output made in one go before the worker's event loop gets a turn: a few KiB of zstd can stand for gigabytes,
 * and meanwhile the worker could not hear of a cancelled pull nor feed its other layers.
 */
const YIELD_BYTES = 8 << 20;

/** Whether `stream` offers the synchronous call (Node's own gunzipSync relies on it; checked, not assumed). */
export function decompressesInThread(stream: zlib.Gunzip | zlib.ZstdDecompress): boolean {
  const n = stream as Decompressor;
  return typeof n._handle?.writeSync === 'function' && n._writeState instanceof Uint32Array && n._writeState.length >= 2
    && typeof n._defaultFlushFlag === 'number' && typeof n._finishFlushFlag === 'number';
}

export class InPlaceDecompressor {
  private readonly z: Decompressor;
  private out: Buffer;
  private outOff = 0;
  /** Output made since the event loop last had a turn. */
  private madeSinceTurn = 0;
  private closed = false;
  /** The library took no more input: the data is over, and whatever else is written is not inflated. */
  ended = false;

  /**
   * `stream`: a fresh gunzip or zstd stream, only its native state used (see decompressesInThread); `piece`: the
   * size of the output buffers, each handed on as it fills.
   */
  constructor(stream: zlib.Gunzip | zlib.ZstdDecompress, private readonly piece: number) {
    this.z = stream as Decompressor;
    this.out = Buffer.allocUnsafe(piece);
    // A bad stream is reported by the library destroying `z` during the call: read back there as `errored`.
    this.z.on('error', () => undefined);
  }

  /** Inflates `input`, handing each piece made to `take`; rejects with the library's error on bad data. */
  write(input: Uint8Array, take: TakePiece): Promise<void> {
    return this.run(input, this.z._defaultFlushFlag!, take);
  }

  /** Ends the data: what the library still holds comes out, and a stream cut short fails here. */
  async finish(take: TakePiece): Promise<void> {
    await this.run(EMPTY, this.z._finishFlushFlag!, take);
    this.close();
  }

  /** Gives the library's memory back (a zstd window of up to 128 MiB); nothing more is made after. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.z.close();
  }

  private async run(input: Uint8Array, flush: number, take: TakePiece): Promise<void> {
    let off = 0;
    let len = input.length;
    while (!this.ended && !this.closed) {
      const room = this.out.length - this.outOff;
      this.z._handle!.writeSync(flush, input, off, len, this.out, this.outOff, room);
      if (this.z.errored) throw this.z.errored;
      const availOut = this.z._writeState![0]!;
      const availIn = this.z._writeState![1]!;
      off += len - availIn;
      len = availIn;
      const made = room - availOut;
      const piece = this.out.subarray(this.outOff, this.outOff + made);
      this.outOff += made;
      if (availOut === 0) {
        this.out = Buffer.allocUnsafe(this.piece);
        this.outOff = 0;
      }
      // Output room left over: the library took all it will of this input. With input left (zeros padding a gzip
      // member, or anything after the data), the data ends there, as Node's own gunzip stream ends it.
      if (availOut !== 0 && availIn > 0) {
        this.ended = true;
        this.close();
      }
      if (made > 0) {
        const taken = take(piece);
        if (taken) await taken;
      }
      if (availOut !== 0) return;
      this.madeSinceTurn += made;
      if (this.madeSinceTurn >= YIELD_BYTES) {
        this.madeSinceTurn = 0;
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
  }
}
