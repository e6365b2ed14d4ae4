// Unpacking one layer blob (gzip, zstd or plain tar) into its own directory, safely: every path, link and
// whiteout is resolved inside the layer root, symlinks met on the way are followed only within it, and the
// final component is never followed. OCI whiteouts become overlayfs whiteouts (0/0 char devices, opaque xattr).
import { createHash } from 'node:crypto';
import { chmodSync, createReadStream, createWriteStream, lchownSync, linkSync, lstatSync, lutimesSync, mkdirSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { mkdir, open } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { setAttribute } from '@napi-rs/xattr';
import { execa } from 'execa';
import tar from 'tar-stream';
import { Internal, InvalidArgument } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { classifyEntry, confine, symlinkTarget, xattrAllowed } from './layerpath.js';

const MAX_SYMLINK_HOPS = 40;
/** Files up to this size are written in one call; larger ones stream. */
const SMALL_FILE = 1 << 20;

async function collect(body: AsyncIterable<Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(c);
  return Buffer.concat(chunks);
}

type Compression = 'gzip' | 'zstd' | 'none';

async function sniff(file: string): Promise<Compression> {
  const fh = await open(file, 'r');
  try {
    const { buffer, bytesRead } = await fh.read(Buffer.alloc(4), 0, 4, 0);
    if (bytesRead >= 2 && buffer[0] === 0x1f && buffer[1] === 0x8b) return 'gzip';
    if (bytesRead === 4 && buffer.readUInt32LE(0) === 0xfd2fb528) return 'zstd';
    return 'none';
  } finally {
    await fh.close();
  }
}

/**
 * The stages producing a layer blob's uncompressed tar stream; zstd goes through the zstd tool since Node 20
 * lacks it, and `exited` then reports how the tool ended.
 */
function decompression(file: string, compression: Compression): { stages: Readable[]; exited: Promise<unknown> } {
  if (compression === 'zstd') {
    const proc = execa('zstd', ['-dcq', file], { stdout: 'pipe', buffer: false, stdin: 'ignore' });
    // Handled here so a failing tool cannot surface as an unhandled rejection before unpackLayer awaits it.
    proc.catch(() => undefined);
    return { stages: [proc.stdout], exited: proc };
  }
  const raw = createReadStream(file, { highWaterMark: 1 << 20 });
  if (compression === 'none') return { stages: [raw], exited: Promise.resolve() };
  return { stages: [raw, createGunzip({ chunkSize: 256 << 10 })], exited: Promise.resolve() };
}

export interface UnpackResult { diffId: string; bytes: number }

/**
 * Unpacks `blobFile` into `dest` (which must not exist yet; the caller renames it into place). Returns the
 * digest of the uncompressed stream so the caller can check it against the image config's diff id.
 */
export async function unpackLayer(blobFile: string, dest: string, what: string, log: Logger): Promise<UnpackResult> {
  const started = Date.now();
  await mkdir(dest, { mode: 0o755 });
  const { stages, exited } = decompression(blobFile, await sniff(blobFile));
  const hash = createHash('sha256');
  let bytes = 0;
  const tap = new Transform({ transform(chunk: Buffer, _e, cb) { hash.update(chunk); bytes += chunk.length; cb(null, chunk); } });
  // tar-stream's extract keeps consuming past the end-of-archive blocks, so the digest covers the whole stream.
  const extract = tar.extract();
  const feeding = (pipeline as (...streams: unknown[]) => Promise<void>)(...stages, tap, extract);
  // Awaited below; handled now so a failure while entries are still being applied is not an unhandled rejection.
  feeding.catch(() => undefined);
  const u = new Unpacker(dest, what);
  try {
    for await (const entry of extract) {
      await u.apply(entry.header as Header, entry as AsyncIterable<Buffer>);
      entry.resume();
    }
    await feeding;
    await exited;
    u.finish();
  } catch (err) {
    for (const s of stages) s.destroy();
    extract.destroy();
    await feeding.catch(() => undefined);
    await exited.catch(() => undefined);
    if (err instanceof InvalidArgument || err instanceof Internal) throw err;
    throw new InvalidArgument(`${what} cannot be unpacked: ${(err as Error).message}`, { cause: err });
  }
  const diffId = `sha256:${hash.digest('hex')}`;
  log.debug({ layer: what, bytes, ms: Date.now() - started }, 'layer unpacked');
  return { diffId, bytes };
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

  constructor(private readonly root: string, private readonly what: string) {}

  async apply(h: Header, body: AsyncIterable<Buffer>): Promise<void> {
    const c = classifyEntry(h.name);
    if (c.kind === 'ignore') return;
    if (c.kind === 'opaque') {
      await setAttribute(this.resolve(c.dir, true), 'trusted.overlay.opaque', 'y');
      return;
    }
    if (c.kind === 'whiteout') {
      const path = join(this.resolve(c.dir, true), c.name);
      this.clear(path, false);
      await execa('mknod', ['-m', '0000', path, 'c', '0', '0']);
      return;
    }
    if (c.path.length === 0) {
      if (h.type === 'directory') await this.meta(this.root, h, true);
      return;
    }
    const path = join(this.resolve(c.path.slice(0, -1), true), c.path[c.path.length - 1]!);
    const mode = (h.mode ?? 0o644) & 0o7777;
    switch (h.type) {
      case 'directory':
        if (!this.clear(path, true)) mkdirSync(path, { mode: 0o700 });
        this.dirs.add(path);
        await this.meta(path, h, true);
        return;
      case 'file':
      case 'contiguous-file':
        this.clear(path, false);
        if ((h.size ?? 0) <= SMALL_FILE) writeFileSync(path, await collect(body), { flag: 'wx', mode: 0o600 });
        else await pipeline(body, createWriteStream(path, { flags: 'wx', mode: 0o600 }));
        await this.meta(path, h, false);
        return;
      case 'symlink':
        this.clear(path, false);
        symlinkSync(h.linkname ?? '', path);
        await this.meta(path, h, false, true);
        return;
      case 'link': {
        const target = confine(h.linkname ?? '');
        if (target.length === 0) throw new InvalidArgument(`${this.what}: hardlink "${h.name}" points at the layer root`);
        let targetPath: string | undefined;
        try {
          targetPath = join(this.resolve(target.slice(0, -1), false), target[target.length - 1]!);
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
        const m = mode.toString(8);
        if (h.type === 'fifo') await execa('mkfifo', ['-m', m, path]);
        else await execa('mknod', ['-m', m, path, h.type === 'block-device' ? 'b' : 'c', String(h.devmajor ?? 0), String(h.devminor ?? 0)]);
        await this.meta(path, h, false);
        return;
      }
      default:
        throw new InvalidArgument(`${this.what}: entry "${h.name}" has unsupported type ${String(h.type)}`);
    }
  }

  finish(): void {
    for (const d of this.dirTimes.reverse()) lutimesSync(d.path, d.mtime, d.mtime);
  }

  /**
   * The real directory for `parts` under the root, following symlinks only inside the root (a symlink to
   * "/etc" means <root>/etc). Missing directories are created when `create`, else it is an error.
   */
  private resolve(parts: readonly string[], create: boolean): string {
    let done: string[] = [];
    let todo = [...parts];
    let hops = 0;
    while (todo.length > 0) {
      const next = [...done, todo.shift()!];
      const path = join(this.root, ...next);
      if (this.dirs.has(path)) {
        done = next;
        continue;
      }
      const st = lstatSync(path, { throwIfNoEntry: false });
      if (!st) {
        if (!create) throw new InvalidArgument(`${this.what}: "${next.join('/')}" does not exist in the layer`);
        mkdirSync(path, { mode: 0o755 });
        this.dirs.add(path);
        done = next;
      } else if (st.isSymbolicLink()) {
        if (++hops > MAX_SYMLINK_HOPS) throw new InvalidArgument(`${this.what}: too many symlinks resolving "${parts.join('/')}"`);
        todo = [...symlinkTarget(done, readlinkSync(path)), ...todo];
        done = [];
      } else if (st.isDirectory()) {
        this.dirs.add(path);
        done = next;
      } else {
        throw new InvalidArgument(`${this.what}: "${next.join('/')}" is not a directory but has entries under it`);
      }
    }
    return join(this.root, ...done);
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

  private async meta(path: string, h: Header, isDir: boolean, isSymlink = false): Promise<void> {
    lchownSync(path, h.uid ?? 0, h.gid ?? 0);
    // chown clears setuid/setgid, so the mode comes after it.
    if (!isSymlink) chmodSync(path, (h.mode ?? (isDir ? 0o755 : 0o644)) & 0o7777);
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
