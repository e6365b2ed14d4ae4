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
 * A new file at `path` written with the calling thread's own system calls, in the same batches as FileSink: for
 * an unpack worker, a thread of its own, where a trip through the pool per batch (and the wake-ups on both sides)
 * cost more than the write. The pieces written must stay unchanged until the next flush (at most BATCH later).
 */
export class InPlaceFile {
  private readonly fd: number;
  private parts: Buffer[] = [];
  private bytes = 0;

  constructor(private readonly path: string) {
    this.fd = openSync(path, 'wx', 0o600);
  }

  write(chunk: Buffer): void {
    this.parts.push(chunk);
    this.bytes += chunk.length;
    if (this.bytes >= BATCH) this.flush();
  }

  /** Writes what is batched and closes the file; after a failure (`ok` false), only closes it. */
  close(ok: boolean): void {
    let error: unknown;
    try {
      if (ok) this.flush();
    } catch (err) {
      error = err;
    }
    try {
      closeSync(this.fd);
    } catch (err) {
      // A failure to close is the error only when nothing failed before it.
      if (ok) error ??= err;
    }
    if (error !== undefined) throw error;
  }

  private flush(): void {
    while (this.parts.length > 0) {
      const written = writevSync(this.fd, this.parts);
      // Nothing taken and no error (a filesystem that will not say why): going again would spin forever.
      if (written === 0) throw Object.assign(new Error(`writing ${this.path}: the filesystem took no bytes`), { code: 'EIO' });
      this.parts = unwritten(this.parts, written);
    }
    this.bytes = 0;
  }
}

/** Writes `body` to a new file at `path` with the calling thread's own system calls (see InPlaceFile). */
export async function writeFileInPlace(path: string, body: AsyncIterable<Buffer>): Promise<void> {
  const file = new InPlaceFile(path);
  let ok = false;
  try {
    for await (const chunk of body) file.write(chunk);
    ok = true;
  } finally {
    file.close(ok);
  }
}
