// The content store: blobs addressed by digest under <root>/blobs/sha256. A blob is written to a temp file,
// hashed while it streams, and renamed into place only when size and digest match, so the store never holds
// a partial or corrupt blob. Concurrent requests for one digest share a single download.
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform, Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { MinicriError, Internal } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { retry } from '../../core/retry.js';
import { FileSink } from './file-sink.js';
import { SingleFlight } from '../../core/locks.js';
import { exists } from '../../core/fs.js';

/** A blob being written as it streams by; see ContentStore.tee. */
export interface BlobTee {
  stream: Transform;
  bytes(): number;
  commit(): Promise<void>;
  discard(): Promise<void>;
}

export interface BlobSlot { tmp: string; commit(): Promise<void>; discard(): Promise<void> }

export interface BlobWriter {
  stream: Transform;
  bytes(): number;
  /** True once the whole blob went by with the right size and digest. */
  verified(): boolean;
  /** Settles when the temp file is closed. */
  closed: Promise<void>;
}

/**
 * A blob's size and digest, checked as its bytes go by: update() fails as soon as there are more bytes than
 * declared, verify() at the end when size or digest are wrong.
 */
export class BlobCheck {
  private readonly hash = createHash('sha256');
  bytes = 0;

  constructor(private readonly digest: string, private readonly size: number | undefined, private readonly what: string) {}

  update(chunk: Uint8Array): void {
    this.bytes += chunk.length;
    if (this.size !== undefined && this.bytes > this.size) {
      throw new Internal(`${this.what} is larger than its declared ${this.size} bytes: the registry serves corrupt content`);
    }
    this.hash.update(chunk);
  }

  verify(): void {
    const got = `sha256:${this.hash.digest('hex')}`;
    if (this.size !== undefined && this.bytes !== this.size) {
      throw new Internal(`${this.what} is ${this.bytes} bytes, not the declared ${this.size}: the registry serves corrupt content`);
    }
    if (got !== this.digest) throw new Internal(`${this.what} has digest ${got}, not ${this.digest}: the registry serves corrupt content`);
  }
}

/**
 * The pass-through behind ContentStore.tee: hashes the bytes going by, writes them to `tmp` when given, and
 * fails at the end of the stream (after the file is complete) when size or digest are wrong.
 */
export function blobWriter(
  tmp: string | undefined, digest: string, size: number | undefined, what: string, onBytes?: (n: number) => void,
): BlobWriter {
  const check = new BlobCheck(digest, size, what);
  const file = tmp === undefined ? undefined : new FileSink(tmp);
  let verified = false;
  const closed = file ? new Promise<void>((resolve) => file.once('close', resolve)) : Promise.resolve();
  const stream = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      try {
        check.update(chunk);
      } catch (err) {
        return cb(err as Error);
      }
      onBytes?.(chunk.length);
      if (!file || file.write(chunk)) cb(null, chunk);
      else file.once('drain', () => cb(null, chunk));
    },
    flush(cb) {
      const verify = () => {
        try {
          check.verify();
        } catch (err) {
          return cb(err as Error);
        }
        verified = true;
        cb();
      };
      if (file) file.end(verify);
      else verify();
    },
  });
  file?.on('error', (err) => stream.destroy(err));
  // A writer given up on (its stream destroyed) closes its file too.
  stream.on('close', () => { if (!verified) file?.destroy(); });
  return { stream, bytes: () => check.bytes, verified: () => verified, closed };
}

export class ContentStore {
  private readonly dir: string;
  private readonly flights = new SingleFlight<number>();

  /** `onBytes` hears of every byte written as it streams in (the pull metrics). */
  constructor(root: string, private readonly tmpDir: string, private readonly log: Logger, private readonly onBytes?: (n: number) => void) {
    this.dir = join(root, 'blobs', 'sha256');
  }

  async init(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    await mkdir(this.tmpDir, { recursive: true });
  }

  path(digest: string): string {
    return join(this.dir, hexOf(digest));
  }

  async has(digest: string): Promise<boolean> {
    return exists(this.path(digest));
  }

  read(digest: string): Promise<Buffer> {
    return readFile(this.path(digest));
  }

  /** Stores bytes we already hold (manifests, configs); returns the digest. */
  async put(bytes: Buffer): Promise<string> {
    const digest = digestOf(bytes);
    if (await this.has(digest)) return digest;
    const tmp = this.tmpPath();
    try {
      await writeFile(tmp, bytes);
      await rename(tmp, this.path(digest));
    } finally {
      await rm(tmp, { force: true });
    }
    return digest;
  }

  /**
   * Makes sure the blob is present, streaming it from `open` when not. Returns bytes downloaded (0 when it was
   * already there or another caller fetched it). `open` is retried on transient (non-typed) errors.
   */
  async ensure(
    digest: string, size: number | undefined, what: string, open: (signal: AbortSignal) => Promise<Readable>,
    signal?: AbortSignal, attempts = 3,
  ): Promise<number> {
    if (await this.has(digest)) return 0;
    let fetched = false;
    const bytes = await this.flights.do(digest, async (shared) => {
      if (await this.has(digest)) return 0;
      fetched = true;
      return retry(async () => this.ingest(digest, size, what, await open(shared)), {
        attempts, signal: shared,
        retryable: (err) => !(err instanceof MinicriError),
        onRetry: (err, attempt) => this.log.debug({ digest, attempt, err: (err as Error).message }, 'blob download interrupted, retrying'),
      });
    }, signal);
    // Callers that joined another's download report nothing, so a pull's byte count is what it fetched itself.
    return fetched ? bytes : 0;
  }

  private async ingest(digest: string, size: number | undefined, what: string, source: Readable): Promise<number> {
    const tee = this.tee(digest, size, what);
    try {
      await pipeline(source, tee.stream, new Writable({ write(_c, _e, cb) { cb(); } }));
      await tee.commit();
      return tee.bytes();
    } finally {
      await tee.discard();
    }
  }

  /**
   * A pass-through that writes the blob's bytes to a temp file as they go by, hashing them; it fails at the
   * end of the stream when size or digest are wrong, so whatever reads through it (an unpack) fails too.
   * commit() moves the verified blob into the store; discard() removes the temp file unless committed.
   */
  tee(digest: string, size: number | undefined, what: string): BlobTee {
    const slot = this.slot(digest);
    const writer = blobWriter(slot.tmp, digest, size, what, this.onBytes);
    return {
      stream: writer.stream,
      bytes: writer.bytes,
      commit: async () => {
        if (!writer.verified()) throw new Internal(`${what}: stored before it was verified`);
        await writer.closed;
        await slot.commit();
      },
      discard: async () => {
        writer.stream.destroy();
        await writer.closed;
        await slot.discard();
      },
    };
  }

  /** A temp file for a blob someone else writes and verifies (see blobWriter); commit() puts it in place. */
  slot(digest: string): BlobSlot {
    const tmp = this.tmpPath();
    return { tmp, commit: () => rename(tmp, this.path(digest)), discard: () => rm(tmp, { force: true }) };
  }

  async list(): Promise<string[]> {
    return (await readdir(this.dir)).filter((n) => /^[a-f0-9]{64}$/.test(n)).map((n) => `sha256:${n}`);
  }

  async delete(digest: string): Promise<void> {
    await rm(this.path(digest), { force: true });
  }

  private tmpPath(): string {
    return join(this.tmpDir, `blob-${randomBytes(8).toString('hex')}`);
  }
}

/** The content digest of bytes held whole: "sha256:<64 hex>". */
export function digestOf(bytes: Uint8Array): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

export function hexOf(digest: string): string {
  const m = /^sha256:([a-f0-9]{64})$/.exec(digest);
  if (!m) throw new Internal(`not a sha256 digest: ${digest}`);
  return m[1]!;
}
