// Writes to files in large pieces: each write is a syscall and a trip through libuv's thread pool, and 100 MB
// written in the 64 KiB pieces a socket or gunzip hands out costs about twice the CPU of 1 MiB writes.
import { Transform, type TransformCallback } from 'node:stream';

/** Gathers chunks into pieces of at least `size` bytes (the last one may be smaller). */
export class Coalesce extends Transform {
  private parts: Buffer[] = [];
  private bytes = 0;

  constructor(private readonly size = 1 << 20) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.parts.push(chunk);
    this.bytes += chunk.length;
    if (this.bytes < this.size) return cb();
    cb(null, this.gathered());
  }

  override _flush(cb: TransformCallback): void {
    cb(null, this.bytes > 0 ? this.gathered() : undefined);
  }

  private gathered(): Buffer {
    const piece = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.bytes);
    this.parts = [];
    this.bytes = 0;
    return piece;
  }
}
