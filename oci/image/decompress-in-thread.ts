// gunzip and zstd on the calling thread, for the unpack workers. Node's decompression streams run each piece in
// libuv's thread pool and call back: for a 100 MB layer that is hundreds of wake-ups of a pool thread and of
// the worker, whose scheduling cost (in a VM above all) came to more CPU than the inflating itself. A worker is
// a thread of its own, so it decompresses in place with the same library, through the synchronous call Node's
// gunzipSync makes, keeping to its reader's pace: more output is made only once the last was taken, so a small
// layer that inflates to gigabytes fills no memory.
import { Duplex } from 'node:stream';
import type * as zlib from 'node:zlib';

/** What Node's synchronous one-shot functions use of a decompression stream: its native handle and flush flags. */
interface Native {
  _handle?: {
    writeSync(flush: number, input: Uint8Array, inOff: number, inLen: number, out: Uint8Array, outOff: number, outLen: number): void;
  };
  /** After each call: output room left, input left. */
  _writeState?: Uint32Array;
  _defaultFlushFlag?: number;
  _finishFlushFlag?: number;
}

type Decompressor = (zlib.Gunzip | zlib.ZstdDecompress) & Native;

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

interface Pending { input: Uint8Array; off: number; len: number; flush: number; done(err?: Error | null): void }

export class DecompressInThread extends Duplex {
  private readonly z: Decompressor;
  private out: Buffer;
  private outOff = 0;
  private pending: Pending | undefined;
  private pumping = false;
  /** Output made since the event loop last had a turn, and whether the loop is having one now. */
  private madeSinceTurn = 0;
  private yielding = false;
  /** The library took no more input: the stream is over, and whatever else is written is dropped. */
  private ended = false;

  /**
   * `stream`: a fresh gunzip or zstd stream, only its native state used (see decompressesInThread); `piece`: the
   * size of the output buffers, each handed on as it fills.
   */
  constructor(stream: zlib.Gunzip | zlib.ZstdDecompress, private readonly piece: number) {
    super({ readableHighWaterMark: piece * 2 });
    this.z = stream as Decompressor;
    this.out = Buffer.allocUnsafe(piece);
    // A bad stream is reported by the library destroying `z` during the call: read back there as `errored`.
    this.z.on('error', () => undefined);
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    if (this.ended) return cb();
    this.pending = { input: chunk, off: 0, len: chunk.length, flush: this.z._defaultFlushFlag!, done: cb };
    this.pump();
  }

  override _final(cb: (err?: Error | null) => void): void {
    if (this.ended) return cb();
    this.pending = {
      input: EMPTY, off: 0, len: 0, flush: this.z._finishFlushFlag!,
      done: (err) => {
        if (!err) this.push(null);
        this.z.close();
        cb(err);
      },
    };
    this.pump();
  }

  override _read(): void {
    this.pump();
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.pending = undefined;
    this.z.destroy();
    cb(err);
  }

  /**
   * Decompresses the pending input until it is used up, or the reader has enough for now (its _read goes on), or
   * YIELD_BYTES were made since the event loop last turned (a turn, then on). A reader taking each piece as it
   * comes calls back through promises and process.nextTick, never through the event loop, hence the count.
   */
  private pump(): void {
    // Re-entered from push() or from a job's callback: the loop below is still running and takes it on.
    if (this.pumping || this.yielding) return;
    this.pumping = true;
    try {
      let wanted = true;
      // A job's callback may hand in the next job at once (the last write's callback starts the final flush).
      while (this.pending && this.madeSinceTurn < YIELD_BYTES && wanted) wanted = this.step(this.pending);
      if (this.pending && wanted) this.turn();
    } finally {
      this.pumping = false;
    }
  }

  /** Lets the event loop turn (other messages, a cancel, other layers), then goes on. */
  private turn(): void {
    this.madeSinceTurn = 0;
    this.yielding = true;
    setImmediate(() => {
      this.yielding = false;
      this.pump();
    });
  }

  /** One call into the library for `job`; false when the reader has enough for now. */
  private step(job: Pending): boolean {
    const room = this.out.length - this.outOff;
    this.z._handle!.writeSync(job.flush, job.input, job.off, job.len, this.out, this.outOff, room);
    if (this.z.errored) {
      this.pending = undefined;
      job.done(this.z.errored);
      return true;
    }
    const availOut = this.z._writeState![0]!;
    const availIn = this.z._writeState![1]!;
    job.off += job.len - availIn;
    job.len = availIn;
    const made = room - availOut;
    this.madeSinceTurn += made;
    let wanted = true;
    if (made > 0) {
      wanted = this.push(this.out.subarray(this.outOff, this.outOff + made));
      this.outOff += made;
    }
    if (availOut === 0 || this.outOff >= this.out.length) {
      this.out = Buffer.allocUnsafe(this.piece);
      this.outOff = 0;
    }
    // Output room left over: the library took all it will of this input. With input left (zeros padding a gzip
    // member, or anything after the data), the stream ends there, as Node's own gunzip stream ends it.
    if (availOut !== 0) {
      this.pending = undefined;
      if (availIn > 0) this.endHere();
      job.done();
      return true;
    }
    return wanted;
  }

  private endHere(): void {
    this.ended = true;
    this.push(null);
    // A zstd window of up to 128 MiB is given back now, not when the stream is collected.
    this.z.close();
  }
}
