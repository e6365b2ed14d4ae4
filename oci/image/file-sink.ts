// Writes a file in large batches: each write is a syscall and a trip through libuv's thread pool, and 100 MB
// written in the 64 KiB pieces a socket or gunzip hands out costs about twice the CPU of 1 MiB writes. The
// pieces are handed to one writev as they are, not copied into a larger buffer: the daemon's malloc maps each
// allocation of 128 KiB or more afresh (MALLOC_MMAP_THRESHOLD_), so large buffers cost page faults.
import { closeSync, openSync, writevSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { Writable } from 'node:stream';

const BATCH = 1 << 20;

export class FileSink extends Writable {
  private fh: FileHandle | undefined;
  private parts: Buffer[] = [];
  private bytes = 0;

  constructor(private readonly path: string, private readonly flags = 'wx', private readonly mode = 0o600) {
    super({ highWaterMark: BATCH });
  }

  override _construct(cb: (err?: Error | null) => void): void {
    open(this.path, this.flags, this.mode).then((fh) => { this.fh = fh; cb(); }, cb);
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.parts.push(chunk);
    this.bytes += chunk.length;
    if (this.bytes < BATCH) return cb();
    this.flushParts().then(() => cb(), cb);
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.flushParts().then(() => cb(), cb);
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    const fh = this.fh;
    this.fh = undefined;
    if (!fh) return cb(err);
    fh.close().then(() => cb(err), (closeErr: Error) => cb(err ?? closeErr));
  }

  private async flushParts(): Promise<void> {
    let parts = this.parts;
    this.parts = [];
    this.bytes = 0;
    while (parts.length > 0) parts = unwritten(parts, (await this.fh!.writev(parts)).bytesWritten);
  }
}

/** What is left of `parts` after a write took `written` bytes: a short write (rare on a regular file) goes again. */
function unwritten(parts: Buffer[], written: number): Buffer[] {
  let i = 0;
  while (i < parts.length && written >= parts[i]!.length) written -= parts[i++]!.length;
  const left = parts.slice(i);
  if (written > 0) left[0] = left[0]!.subarray(written);
  return left;
}

/**
 * Writes `body` to a new file at `path` with the calling thread's own system calls, in the same batches as
 * FileSink: for an unpack worker, a thread of its own, where a trip through the pool per batch (and the wake-ups
 * on both sides) cost more than the write.
 */
export async function writeFileInPlace(path: string, body: AsyncIterable<Buffer>): Promise<void> {
  const fd = openSync(path, 'wx', 0o600);
  let failed = true;
  try {
    let parts: Buffer[] = [];
    let bytes = 0;
    const flush = () => {
      while (parts.length > 0) {
        const written = writevSync(fd, parts);
        // Nothing taken and no error (a filesystem that will not say why): going again would spin forever.
        if (written === 0) throw Object.assign(new Error(`writing ${path}: the filesystem took no bytes`), { code: 'EIO' });
        parts = unwritten(parts, written);
      }
      bytes = 0;
    };
    for await (const chunk of body) {
      parts.push(chunk);
      bytes += chunk.length;
      if (bytes >= BATCH) flush();
    }
    flush();
    failed = false;
  } finally {
    // A failure to close is the error only when nothing failed before it.
    try {
      closeSync(fd);
    } catch (err) {
      if (!failed) throw err;
    }
  }
}
