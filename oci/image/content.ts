// The content store: blobs addressed by digest under <root>/blobs/sha256. A blob is written to a temp file,
// hashed while it streams, and renamed into place only when size and digest match, so the store never holds
// a partial or corrupt blob. Concurrent requests for one digest share a single download.
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { MinicriError, Internal } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { SingleFlight } from './flight.js';

export class ContentStore {
  private readonly dir: string;
  private readonly flights = new SingleFlight<number>();

  constructor(root: string, private readonly tmpDir: string, private readonly log: Logger) {
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
    return stat(this.path(digest)).then(() => true, () => false);
  }

  read(digest: string): Promise<Buffer> {
    return readFile(this.path(digest));
  }

  /** Stores bytes we already hold (manifests, configs); returns the digest. */
  async put(bytes: Buffer): Promise<string> {
    const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
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
  async ensure(digest: string, size: number | undefined, what: string, open: () => Promise<Readable>, attempts = 3): Promise<number> {
    if (await this.has(digest)) return 0;
    let fetched = false;
    const bytes = await this.flights.do(digest, async () => {
      if (await this.has(digest)) return 0;
      fetched = true;
      for (let attempt = 1; ; attempt++) {
        try {
          return await this.ingest(digest, size, what, await open());
        } catch (err) {
          if (err instanceof MinicriError || attempt >= attempts) throw err;
          this.log.debug({ digest, attempt, err: (err as Error).message }, 'blob download interrupted, retrying');
          await new Promise((r) => setTimeout(r, 200 * 2 ** (attempt - 1)));
        }
      }
    });
    // Callers that joined another's download report nothing, so a pull's byte count is what it fetched itself.
    return fetched ? bytes : 0;
  }

  private async ingest(digest: string, size: number | undefined, what: string, source: Readable): Promise<number> {
    const hash = createHash('sha256');
    let bytes = 0;
    const meter = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        bytes += chunk.length;
        if (size !== undefined && bytes > size) return cb(new Internal(`${what} is larger than its declared ${size} bytes: the registry serves corrupt content`));
        hash.update(chunk);
        cb(null, chunk);
      },
    });
    const tmp = this.tmpPath();
    try {
      await pipeline(source, meter, createWriteStream(tmp, { flags: 'wx' }));
      const got = `sha256:${hash.digest('hex')}`;
      if (size !== undefined && bytes !== size) throw new Internal(`${what} is ${bytes} bytes, not the declared ${size}: the registry serves corrupt content`);
      if (got !== digest) throw new Internal(`${what} has digest ${got}, not ${digest}: the registry serves corrupt content`);
      await rename(tmp, this.path(digest));
      return bytes;
    } finally {
      await rm(tmp, { force: true });
    }
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

export function hexOf(digest: string): string {
  const m = /^sha256:([a-f0-9]{64})$/.exec(digest);
  if (!m) throw new Internal(`not a sha256 digest: ${digest}`);
  return m[1]!;
}
