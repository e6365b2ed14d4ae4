// Unpacking one layer blob (gzip, zstd or plain tar) into its own directory, safely: every path, link and
// whiteout is resolved inside the layer root, symlinks met on the way are followed only within it, and the
// final component is never followed. OCI whiteouts become overlayfs whiteouts (0/0 char devices, opaque xattr).
import { createHash } from 'node:crypto';
import {
  chmodSync, lchownSync, linkSync, lstatSync, lutimesSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync,
  writeFileSync,
} from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { isMainThread } from 'node:worker_threads';
import { Duplex, PassThrough, Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import * as zlib from 'node:zlib';
import { setAttribute } from '@napi-rs/xattr';
import tar from 'tar-stream';
import { Internal, InvalidArgument, MinicriError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { makeNode } from '../../core/posix.js';
import { blobWriter } from './content.js';
import { FileSink, writeFileInPlace } from './file-sink.js';
import { zstdDecompress } from './zstd.js';
import { dirInRoot } from './dir-in-root.js';
import { classifyEntry, confine, xattrAllowed } from './layerpath.js';

/** The daemon's malloc mmap threshold (server/main.ts), and room for malloc's own header below it. */
const MALLOC_MMAP_THRESHOLD = 128 << 10;
const MALLOC_OVERHEAD = 64;

/** System errors that are the node's, not the layer's: a layer that meets one is not a bad layer (a full disk). */
const HOST_ERRORS = new Set(['ENOSPC', 'EDQUOT', 'EIO', 'EROFS', 'ENOMEM', 'EMFILE', 'ENFILE']);

/** Files up to this size are written in one call; larger ones stream. */
const SMALL_FILE = 1 << 20;

/** The bits that decide who owns a new file and what mode it gets: setuid, setgid, sticky. */
const SPECIAL_BITS = 0o7000;

/** The process's umask as the kernel reports it, or undefined where it does not (then every mode is set with chmod). */
function currentUmask(): number | undefined {
  try {
    const m = /^Umask:\s*([0-7]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'));
    return m ? parseInt(m[1]!, 8) : undefined;
  } catch {
    return undefined;
  }
}

async function collect(body: AsyncIterable<Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(c);
  return Buffer.concat(chunks);
}

type Compression = 'gzip' | 'zstd' | 'none';

/** Bytes that tell every format sniff knows; fewer only when the blob is that short. */
const SNIFF_BYTES = 4;

/** The format of a layer blob, told by its first bytes (registries do not always label layers right). */
export function sniff(head: Buffer): Compression {
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) return 'gzip';
  if (head.length >= 4 && head.readUInt32LE(0) === 0xfd2fb528) return 'zstd';
  return 'none';
}

/** A blob's first bytes, gathered until they are enough to sniff (the network may split them over pieces). */
export class FormatHead {
  private held: Buffer | undefined;

  /** `piece` behind what was held before it, once there are SNIFF_BYTES; undefined while there are fewer. */
  add(piece: Buffer): Buffer | undefined {
    const head = this.held ? Buffer.concat([this.held, piece]) : piece;
    this.held = head.length < SNIFF_BYTES ? head : undefined;
    return this.held ? undefined : head;
  }

  /** At the blob's end: what is still held (a blob shorter than any format's mark), taken. */
  rest(): Buffer | undefined {
    const held = this.held;
    this.held = undefined;
    return held;
  }
}

/**
 * Whether this thread writes big files itself: an unpack worker is a thread of its own, where a trip through
 * libuv's pool per piece costs more than the work; the event loop's thread leaves it to the pool.
 */
const IN_PLACE = !isMainThread;

/**
 * Output pieces as large as the daemon's malloc still serves from its arenas (see file-sink.ts): each piece is a
 * trip through the steps after it, and each mapped afresh would cost page faults. A 100 MB pull took about a
 * fifth less CPU than in 64 KiB pieces, and an eighth less than in 256 KiB ones. gunzip makes pieces of this
 * size, and so does either format inflated in place (layer-feed.ts).
 */
export const INFLATE_PIECE = MALLOC_MMAP_THRESHOLD - MALLOC_OVERHEAD;

/** A decompressor of Node's for the data's format: a stream (libuv's pool) whose native state may also be used in place. */
export function nativeDecompressor(compression: 'gzip' | 'zstd'): zlib.Gunzip | zlib.ZstdDecompress {
  return compression === 'gzip' ? zlib.createGunzip({ chunkSize: INFLATE_PIECE }) : zstdDecompress();
}

function decompressor(compression: Compression): Duplex {
  return compression === 'none' ? new PassThrough() : nativeDecompressor(compression);
}

/**
 * A layer blob's bytes in, its uncompressed tar out: the format is told by the first bytes (registries do not
 * always label layers right). On the event loop's thread, decompression runs in libuv's thread pool.
 */
export class Decompress extends Duplex {
  private inner: Duplex | undefined;
  private readonly head = new FormatHead();

  private attach(inner: Duplex): Duplex {
    inner.on('data', (d: Buffer) => { if (!this.push(d)) inner.pause(); });
    inner.on('end', () => this.push(null));
    inner.on('error', (err) => this.destroy(err));
    this.inner = inner;
    return inner;
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    if (!this.inner) {
      const head = this.head.add(chunk);
      if (!head) return cb();
      chunk = head;
      this.attach(decompressor(sniff(chunk)));
    }
    if (this.inner!.write(chunk)) cb();
    else this.inner!.once('drain', () => cb());
  }

  override _final(cb: (err?: Error | null) => void): void {
    // A blob shorter than a format's mark is told by what there is.
    const rest = this.head.rest();
    if (rest) this.attach(decompressor(sniff(rest))).write(rest);
    if (!this.inner) this.push(null);
    else this.inner.end();
    cb();
  }

  override _read(): void {
    this.inner?.resume();
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.inner?.destroy();
    cb(err);
  }
}

export interface UnpackResult { diffId: string; bytes: number }

/** The digest (and size) a downloaded layer's bytes must have, and where they are also kept as its blob, if anywhere. */
export interface BlobToWrite { tmp?: string; digest: string; size?: number }

/**
 * Unpacks `source`; with `blob`, a wrong size or digest of its bytes fails the unpack (content.ts's blobWriter
 * checks them before the stream ends), and with `blob.tmp` they also go to the blob's file on their way.
 */
export async function unpackLayerBlob(
  source: Readable, dest: string, what: string, log: Logger | undefined, blob?: BlobToWrite,
): Promise<UnpackResult> {
  if (!blob) return unpackLayer(source, dest, what, log);
  const writer = blobWriter(blob.tmp, blob.digest, blob.size, what);
  let blobError: unknown;
  writer.stream.on('error', (err) => { blobError ??= err; });
  source.on('error', (err) => writer.stream.destroy(err)).pipe(writer.stream);
  try {
    const result = await unpackLayer(writer.stream, dest, what, log);
    // The layer can end before its blob does (gunzip stops at zeros after a gzip member, zstd at anything after
    // a frame): the rest is read and dropped, so the blob's size and digest are checked all the same.
    writer.stream.unpipe();
    await drain(writer.stream);
    if (blobError) throw blobError;
    if (!writer.verified()) throw new Internal(`${what} ended before its size and digest were checked`);
    return result;
  } finally {
    writer.stream.destroy();
    await writer.closed;
  }
}

/** Reads a stream to its end (or error), discarding the data. */
function drain(stream: Readable): Promise<void> {
  if (stream.destroyed || stream.readableEnded) return Promise.resolve();
  return new Promise((resolve) => {
    stream.once('end', resolve);
    stream.once('close', resolve);
    stream.once('error', () => resolve());
    stream.resume();
  });
}

/**
 * Unpacks a layer blob's bytes from `source` into `dest` (which must not exist yet; the caller renames it into
 * place). Returns the digest of the uncompressed stream so the caller can check it against the image config's
 * diff id. `source` may be the download itself: the blob's own digest is the caller's to check.
 */
export async function unpackLayer(source: Readable, dest: string, what: string, log?: Logger): Promise<UnpackResult> {
  const started = Date.now();
  const decompress = new Decompress();
  // The source's own failure (a stalled download, a digest mismatch, a cancelled pull) says more than ours.
  // Heard from now on: a small blob can end, and fail its digest check, before the directory below is made
  // (and before the pipeline below listens to decompress: destroyed without an error, it cannot throw one).
  let sourceError: unknown;
  source.on('error', (err) => { sourceError ??= err; decompress.destroy(); });
  await mkdir(dest, { mode: 0o755 });
  const hash = createHash('sha256');
  let bytes = 0;
  const tap = new Transform({ transform(chunk: Buffer, _e, cb) { hash.update(chunk); bytes += chunk.length; cb(null, chunk); } });
  const extract = tar.extract();
  source.pipe(decompress);
  const feeding = pipeline(decompress, tap, extract);
  // Awaited below; handled now so a failure while entries are still being applied is not an unhandled rejection.
  feeding.catch(() => undefined);
  try {
    await applyTar(extract, dest, what);
    await feeding;
    if (sourceError) throw sourceError;
  } catch (err) {
    source.unpipe(decompress);
    decompress.destroy();
    extract.destroy();
    await feeding.catch(() => undefined);
    // A blob's digest is known only at its end: read the rest, so that a corrupt download is reported as such.
    if (!sourceError) await drain(source);
    throw sourceError ?? unpackFailure(err, what);
  }
  const diffId = `sha256:${hash.digest('hex')}`;
  log?.debug({ layer: what, bytes, ms: Date.now() - started }, 'layer unpacked');
  return { diffId, bytes };
}

/**
 * Applies the entries of the tar stream `extract` is fed into `dest` (made empty), one after another. tar-stream's
 * extract keeps consuming past the end-of-archive blocks, so whoever feeds it reaches the stream's end.
 */
export async function applyTar(extract: tar.Extract, dest: string, what: string): Promise<void> {
  const u = new Unpacker(dest, what);
  for await (const entry of extract) {
    await u.apply(entry.header as Header, entry as AsyncIterable<Buffer>);
    entry.resume();
  }
  u.finish();
}

/** What a failure to unpack is reported as: the node's own trouble (a full disk) as it is, anything else the layer's. */
export function unpackFailure(err: unknown, what: string): unknown {
  if (err instanceof MinicriError) return err;
  if (HOST_ERRORS.has((err as NodeJS.ErrnoException).code ?? '')) return err;
  return new InvalidArgument(`${what} cannot be unpacked: ${(err as Error).message}`, { cause: err });
}

/**
 * Whether a directory made in `root` (a fresh, empty layer dir) takes its parent's group rather than `gid`, as on
 * a filesystem mounted grpid: asked of the filesystem itself, with a probe of a few system calls, rather than
 * by finding the mount and its options. When the probe cannot tell, it says yes: chown'ing every entry is
 * only slower.
 */
function groupFromDirectory(root: string, gid: number | undefined): boolean {
  if (gid === undefined) return true;
  const other = gid === 0 ? 1 : 0;
  let probe: string | undefined;
  try {
    probe = mkdtempSync(join(root, '.gid-probe-'));
    lchownSync(probe, -1, other);
    mkdirSync(join(probe, 'd'));
    return lstatSync(join(probe, 'd')).gid === other;
  } catch {
    return true;
  } finally {
    if (probe) rmSync(probe, { recursive: true, force: true });
  }
}

/** tar-stream puts PAX records (xattrs among them) on the header; its types leave them out. */
type Header = Omit<tar.Header, 'pax'> & { pax?: Record<string, string> | null };

/**
 * Applies entries one by one. Metadata syscalls are synchronous on purpose: each takes microseconds, while a
 * thread-pool round trip per call made unpacking many small files several times slower; the event loop still
 * runs between entries.
 */
class Unpacker {
  /** Directory metadata is applied last: creating children would bump the mtimes again. */
  private readonly dirTimes: Array<{ path: string; mtime: Date }> = [];
  /** Real directories (not symlinks) already seen or made: saves re-checking every parent of every entry. */
  private readonly dirs = new Set<string>();

  /** The last path create() made anew, so meta() knows its owner and mode are the creation's. */
  private made: string | undefined;
  private readonly umask = currentUmask();
  private readonly uid = process.geteuid?.();
  private readonly gid = process.getegid?.();
  /**
   * Whether new entries may take their directory's group rather than ours: under a setgid directory (the root's
   * parent's, or one of the layer's), or on a filesystem mounted grpid (bsdgroups), where every directory acts so.
   */
  private setgid: boolean;

  constructor(private readonly root: string, private readonly what: string) {
    // The root itself inherits setgid from the directory it was made in.
    this.setgid = (lstatSync(root).mode & 0o2000) !== 0 || groupFromDirectory(root, this.gid);
  }

  async apply(h: Header, body: AsyncIterable<Buffer>): Promise<void> {
    this.made = undefined;
    const c = classifyEntry(h.name);
    if (c.kind === 'ignore') return;
    if (c.kind === 'opaque') {
      await setAttribute(dirInRoot(this.root, c.dir, this.what, true, this.dirs), 'trusted.overlay.opaque', 'y');
      return;
    }
    if (c.kind === 'whiteout') {
      const path = join(dirInRoot(this.root, c.dir, this.what, true, this.dirs), c.name);
      this.clear(path, false);
      makeNode(path, 'c', 0);
      return;
    }
    if (c.path.length === 0) {
      if (h.type === 'directory') await this.meta(this.root, h, true);
      return;
    }
    const path = join(dirInRoot(this.root, c.path.slice(0, -1), this.what, true, this.dirs), c.path[c.path.length - 1]!);
    const mode = (h.mode ?? 0o644) & 0o7777;
    switch (h.type) {
      case 'directory':
        if (!this.create(path, true, () => mkdirSync(path, { mode: this.creationMode(h, 0o755) }))) this.made = undefined;
        this.dirs.add(path);
        await this.meta(path, h, true);
        return;
      case 'file':
      case 'contiguous-file':
        if ((h.size ?? 0) <= SMALL_FILE) {
          const data = await collect(body);
          this.create(path, false, () => writeFileSync(path, data, { flag: 'wx', mode: this.creationMode(h, 0o644) }));
        } else {
          this.clear(path, false);
          await (IN_PLACE ? writeFileInPlace(path, body) : pipeline(body, new FileSink(path)));
        }
        await this.meta(path, h, false);
        return;
      case 'symlink':
        this.create(path, false, () => symlinkSync(h.linkname ?? '', path));
        await this.meta(path, h, false, true);
        return;
      case 'link': {
        const target = confine(h.linkname ?? '');
        if (target.length === 0) throw new InvalidArgument(`${this.what}: hardlink "${h.name}" points at the layer root`);
        let targetPath: string | undefined;
        try {
          const dir = dirInRoot(this.root, target.slice(0, -1), this.what, false, this.dirs);
          if (dir !== undefined) targetPath = join(dir, target[target.length - 1]!);
        } catch { /* reported below */ }
        const st = targetPath ? lstatSync(targetPath, { throwIfNoEntry: false }) : undefined;
        if (!targetPath || !st || st.isDirectory()) {
          throw new InvalidArgument(`${this.what}: hardlink "${h.name}" -> "${h.linkname}" does not name a file earlier in the layer`);
        }
        this.clear(path, false);
        linkSync(targetPath, path);
        return;
      }
      case 'character-device':
      case 'block-device':
      case 'fifo': {
        this.clear(path, false);
        makeNode(path, h.type === 'fifo' ? 'p' : h.type === 'block-device' ? 'b' : 'c', mode, h.devmajor ?? 0, h.devminor ?? 0);
        await this.meta(path, h, false);
        return;
      }
      default:
        throw new InvalidArgument(`${this.what}: entry "${h.name}" has unsupported type ${String(h.type)}`);
    }
  }

  /**
   * Makes an entry with `make`, which fails with EEXIST when something is at `path` already (a layer may name a
   * path twice): that is then removed, unless it is a directory and `wantDir`, and `make` runs again. Trying first
   * saves a lookup per entry, and `make` never follows a symlink there. True when the path holds what `make`
   * made, false when an existing directory stays.
   */
  private create(path: string, wantDir: boolean, make: () => void): boolean {
    this.made = path;
    try {
      make();
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    if (this.clear(path, wantDir)) return false;
    make();
    return true;
  }

  /**
   * The mode to create an entry with: the header's, when the umask leaves it whole, it has no special bit
   * (chown clears those) and no setgid directory exists (a directory made in one inherits the bit), so that
   * meta() needs no chmod; else `fallback`'s owner bits only, chmod'ed later.
   */
  private creationMode(h: Header, fallback: number): number {
    const mode = (h.mode ?? fallback) & 0o7777;
    const exact = this.umask !== undefined && !this.setgid && (mode & (this.umask | SPECIAL_BITS)) === 0;
    return exact ? mode : 0o700 & fallback;
  }

  finish(): void {
    for (const d of this.dirTimes.reverse()) lutimesSync(d.path, d.mtime, d.mtime);
  }

  /** Removes what is at `path` unless it is a directory and a directory is wanted; true when a directory stays. */
  private clear(path: string, wantDir: boolean): boolean {
    const st = lstatSync(path, { throwIfNoEntry: false });
    if (!st) return false;
    if (wantDir && st.isDirectory()) return true;
    rmSync(path, { recursive: true, force: true });
    if (st.isDirectory()) for (const d of this.dirs) if (d === path || d.startsWith(`${path}/`)) this.dirs.delete(d);
    return false;
  }

  /**
   * Owner, mode, xattrs and time of the entry just made at `path`. A new entry is already ours (the process's
   * ids) unless a setgid directory gave it its group, so chown runs only when the header asks for other ids or
   * a setgid directory exists; chmod only when the entry was not created with its mode (see creationMode).
   */
  private async meta(path: string, h: Header, isDir: boolean, isSymlink = false): Promise<void> {
    const uid = h.uid ?? 0;
    const gid = h.gid ?? 0;
    const fresh = this.made === path;
    if (!fresh || uid !== this.uid || gid !== this.gid || this.setgid) lchownSync(path, uid, gid);
    const mode = (h.mode ?? (isDir ? 0o755 : 0o644)) & 0o7777;
    // chown clears setuid/setgid, so the mode comes after it.
    if (!isSymlink && !(fresh && this.creationMode(h, isDir ? 0o755 : 0o644) === mode)) chmodSync(path, mode);
    if (isDir && (mode & 0o2000) !== 0) this.setgid = true;
    for (const [key, value] of Object.entries(h.pax ?? {})) {
      if (!key.startsWith('SCHILY.xattr.') || isSymlink) continue;
      const name = key.slice('SCHILY.xattr.'.length);
      if (!xattrAllowed(name)) continue;
      // Best effort: the filesystem or security module may refuse some attributes.
      await setAttribute(path, name, value).catch(() => undefined);
    }
    const mtime = h.mtime ?? new Date(0);
    if (isDir) this.dirTimes.push({ path, mtime });
    else lutimesSync(path, mtime, mtime);
  }
}
