// An unpack worker's way through one layer: each piece of the blob that the main thread sends is checked against
// the blob's size and digest, kept in the blob's file (where blobs are kept), inflated in place, hashed for the
// diff id and handed to the tar parser, by plain calls. The same steps as streams (unpackLayerBlob, as the main
// thread runs them) took a new worker about a third more CPU per layer, and a warm one a fifth: each stream's
// bookkeeping per piece, run unoptimized on a new thread.
import { createHash } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import tar from 'tar-stream';
import { Internal } from '../../core/errors.js';
import { BlobCheck } from './content.js';
import { InPlaceDecompressor, decompressesInThread } from './decompress-in-thread.js';
import { InPlaceFile } from './file-sink.js';
import {
  applyTar, FormatHead, INFLATE_PIECE, nativeDecompressor, sniff, unpackFailure, type BlobToWrite, type UnpackResult,
} from './unpack.js';

export class LayerFeed {
  private readonly diff = createHash('sha256');
  private bytes = 0;
  private inflater: InPlaceDecompressor | 'none' | undefined;
  private readonly head = new FormatHead();
  private readonly extract = tar.extract();
  private readonly applying: Promise<void>;
  /** Wakes a piece waiting for the tar parser to take more (it drained, or it is gone). */
  private wake: (() => void) | undefined;
  /** The layer cannot be unpacked (bad data, an entry refused): later bytes only go to the blob's checks. */
  private failure: unknown;
  /** The blob's own failure (more bytes than declared, its file not written) or its source's: it says more. */
  private sourceError: unknown;
  private result: Promise<UnpackResult> | undefined;

  /** Unpacks into `dest` (made here; see unpackLayer) what is written; with `blob`, checks and keeps the blob too. */
  static async open(dest: string, what: string, blob?: BlobToWrite): Promise<LayerFeed> {
    await mkdir(dest, { mode: 0o755 });
    const check = blob && new BlobCheck(blob.digest, blob.size, what);
    return new LayerFeed(dest, what, check, blob?.tmp === undefined ? undefined : new InPlaceFile(blob.tmp));
  }

  private constructor(
    dest: string, private readonly what: string, private readonly check?: BlobCheck, private readonly file?: InPlaceFile,
  ) {
    const wake = () => {
      const w = this.wake;
      this.wake = undefined;
      w?.();
    };
    this.extract.on('drain', wake);
    this.extract.on('close', wake);
    this.applying = applyTar(this.extract, dest, what).catch((err: unknown) => this.unpackFailed(err));
  }

  /** Takes the next piece of the blob; resolves once it went through (the tar parser took its output). */
  async write(piece: Buffer): Promise<void> {
    if (this.sourceError !== undefined) return;
    try {
      this.check?.update(piece);
      this.file?.write(piece);
    } catch (err) {
      this.abort(err);
      return;
    }
    if (this.failure !== undefined) return;
    try {
      if (!this.inflater) {
        const head = this.head.add(piece);
        if (!head) return;
        piece = head;
        this.inflater = inflaterFor(piece);
      }
      await this.inflate(piece);
    } catch (err) {
      this.unpackFailed(err);
    }
  }

  /**
   * Writes the pieces in turn, and frees each one that is the whole of its memory once written, if nothing here
   * holds it then: a compressed layer's inflater is done with its input when write() resolves, while the tar
   * parser may keep a plain tar's bytes, and the blob's file batches them. The pieces are given away: the caller
   * must not use them, nor any other view of their memory, after (the worker's come moved from the socket).
   * Left to the collector, the memory of a whole pull's pieces waited for the worker's next collection: the
   * daemon's malloc had to grow for them, and a new daemon paid the page faults.
   */
  async takePieces(pieces: Buffer[]): Promise<void> {
    for (const piece of pieces) {
      await this.write(piece);
      if (this.file === undefined && this.inflater instanceof InPlaceDecompressor) free(piece);
    }
  }

  private inflate(piece: Buffer): Promise<unknown> | undefined {
    return this.inflater instanceof InPlaceDecompressor ? this.inflater.write(piece, this.take) : this.take(piece);
  }

  /**
   * The blob itself failed (more bytes than declared, its file not written) or its source did: more bytes cannot
   * change the outcome, and end() can answer now rather than after a download that may never end.
   */
  get blobFailed(): boolean {
    return this.sourceError !== undefined;
  }

  /** The blob is over: the layer's result, or why it failed (the blob's or its source's failure first). */
  end(): Promise<UnpackResult> {
    this.result ??= this.finish();
    return this.result;
  }

  /** The source failed (a stalled download, a cancelled pull): the layer stops here, and end() reports `err`. */
  abort(err: unknown): void {
    this.sourceError ??= err;
    this.stop();
  }

  private async finish(): Promise<UnpackResult> {
    if (this.sourceError === undefined && this.failure === undefined) {
      try {
        const rest = this.head.rest();
        if (rest) {
          // A blob shorter than a format's mark: told by what there is.
          this.inflater = inflaterFor(rest);
          await this.inflate(rest);
        }
        if (this.inflater instanceof InPlaceDecompressor) await this.inflater.finish(this.take);
        this.extract.end(undefined);
      } catch (err) {
        this.unpackFailed(err);
      }
    }
    await this.applying;
    try {
      this.file?.close(this.sourceError === undefined);
      if (this.sourceError === undefined) this.check?.verify();
    } catch (err) {
      this.sourceError ??= err;
    }
    if (this.sourceError !== undefined) throw this.sourceError;
    if (this.failure !== undefined) throw unpackFailure(this.failure, this.what);
    return { diffId: `sha256:${this.diff.digest('hex')}`, bytes: this.bytes };
  }

  /** Hands a piece of the tar stream on; waits while the parser holds enough. */
  private readonly take = (piece: Buffer): Promise<void> | undefined => {
    this.diff.update(piece);
    this.bytes += piece.length;
    // A parser given up on (its reader failed, and the failure is not heard of yet) will not drain: not waited on.
    const over = this.failure !== undefined || this.sourceError !== undefined || this.extract.destroying;
    if (over || this.extract.write(piece)) return undefined;
    return new Promise<void>((resolve) => { this.wake = resolve; });
  };

  private unpackFailed(err: unknown): void {
    this.failure ??= err;
    this.stop();
  }

  /** Nothing more is inflated or parsed (a piece waiting is let go); the blob's checks go on for what comes. */
  private stop(): void {
    if (this.inflater instanceof InPlaceDecompressor) this.inflater.close();
    this.extract.destroy();
  }
}

/**
 * Gives `piece`'s memory back now, when the piece is all of it (a view into more, a pool's slice, is left alone):
 * an ArrayBuffer transferred to a length of 0 is detached, and what it held is freed. Only sooner than the
 * collector would: memory that cannot be detached (a WebAssembly memory's, say) is left to it.
 */
function free(piece: Buffer): void {
  const memory = piece.buffer as ArrayBuffer & { transfer?(length: number): ArrayBuffer };
  if (piece.byteOffset !== 0 || piece.byteLength !== memory.byteLength) return;
  try {
    memory.transfer?.(0);
  } catch {
    // Not detachable: the collector frees it.
  }
}

/** The blob's first bytes tell the format; Node's decompressors are used in place (checked: see decompressesInThread). */
function inflaterFor(head: Buffer): InPlaceDecompressor | 'none' {
  const compression = sniff(head);
  if (compression === 'none') return 'none';
  const native = nativeDecompressor(compression);
  if (!decompressesInThread(native)) {
    native.close();
    throw new Internal(`this Node cannot decompress ${compression} on an unpack worker: run minicri on the Node setup.sh installs`);
  }
  return new InPlaceDecompressor(native, INFLATE_PIECE);
}
