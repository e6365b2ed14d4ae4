// Reading a checkpoint archive for a restore (layout in checkpoint-layout.ts). The archive is input a pod author
// may control, so it is read as hostile: one pass over it takes CRIU's images, config.dump, rootfs-diff.tar and
// deleted.files, and nothing else (spec.dump and bind.mounts are never read: the restored container's spec is
// built from the request; checkpoint-privileges.ts holds the restored processes to it); only plain files and
// directories are taken, by names that stay in the work dir. The rootfs diff is applied into the new
// container's root with every path resolved inside it, a few hundred entries a turn of the event loop.
import { createReadStream, lstatSync } from 'node:fs';
import { chmod, lchown, link, lstat, lutimes, mkdir, open, readFile, rm, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { setImmediate as nextTurn } from 'node:timers/promises';
import tar from 'tar-stream';
import { InvalidArgument, MinicriError } from '../../core/errors.js';
import { dirInRoot } from '../image/dir-in-root.js';
import { confine, WHITEOUT_PREFIX } from '../image/layerpath.js';
import { CHECKPOINT_DIR, CONFIG_DUMP, DELETED_FILES, ROOTFS_DIFF_TAR, type ConfigDump } from './checkpoint-layout.js';

/** The archive's members a restore reads; every other plain file (spec.dump, bind.mounts, logs) is skipped unread. */
const RESTORE_MEMBERS = new Set([CONFIG_DUMP, ROOTFS_DIFF_TAR, DELETED_FILES]);
/** The small JSON members are read whole: more than this is not a checkpoint's. */
export const MAX_JSON_BYTES = 16 << 20;
/** The most paths deleted.files may list: each is a removal in the new root. */
export const MAX_DELETED_FILES = 100_000;
/** Entries handled between two turns of the event loop while a restore changes the new root, so other calls go on. */
const ENTRIES_PER_TURN = 256;

/**
 * An entry name as components, or InvalidArgument when it is absolute or climbs out ("..") of where it is
 * unpacked. Pure.
 */
export function memberPath(name: string, what: string): string[] {
  if (name.startsWith('/')) throw new InvalidArgument(`${what}: entry "${name}" is an absolute path`);
  const parts = name.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) throw new InvalidArgument(`${what}: entry "${name}" leaves the directory it is unpacked into ("..")`);
  return parts;
}

/** What happens to one entry of the archive: taken into the work dir, or skipped unread. Pure. */
export function archiveEntryAction(name: string, type: string | null | undefined, what: string): 'take' | 'skip' {
  const parts = memberPath(name, what);
  if (type !== 'file' && type !== 'contiguous-file' && type !== 'directory') {
    throw new InvalidArgument(
      `${what}: entry "${name}" is a ${type ?? 'entry of unknown type'}; a checkpoint archive holds only files and directories`);
  }
  if (parts[0] === CHECKPOINT_DIR) {
    // CRIU writes its images flat.
    if (parts.length > 2 || (parts.length === 2 && type === 'directory')) {
      throw new InvalidArgument(`${what}: entry "${name}" is not one of CRIU's images (they lie directly in ${CHECKPOINT_DIR}/)`);
    }
    return 'take';
  }
  return parts.length === 1 && type !== 'directory' && RESTORE_MEMBERS.has(parts[0]!) ? 'take' : 'skip';
}

/** What a restore reads of config.dump: the base image (its id first, then its name) and the pod it was taken in. */
export type RestoreConfigDump = Pick<ConfigDump, 'rootfsImageRef' | 'rootfsImage' | 'name' | 'podNamespace' | 'podName'>;

/** The base image and pod a checkpoint's config.dump names ('' for what it leaves out). Pure. */
export function parseConfigDump(text: string, what: string): RestoreConfigDump {
  let dump: Partial<Record<keyof ConfigDump, unknown>>;
  try {
    dump = JSON.parse(text) as typeof dump;
  } catch (err) {
    throw new InvalidArgument(`${what}: ${CONFIG_DUMP} is not JSON: ${(err as Error).message}`);
  }
  const str = (v: unknown) => (typeof v === 'string' ? v : '');
  const out = {
    rootfsImageRef: str(dump?.rootfsImageRef), rootfsImage: str(dump?.rootfsImage), name: str(dump?.name),
    podNamespace: str(dump?.podNamespace), podName: str(dump?.podName),
  };
  if (!out.rootfsImageRef && !out.rootfsImage) {
    throw new InvalidArgument(`${what}: ${CONFIG_DUMP} names no image (rootfsImageRef, rootfsImage) the container ran from`);
  }
  return out;
}

/** deleted.files: a JSON list of absolute paths. Pure. */
export function parseDeletedFiles(text: string, what: string): string[] {
  let list: unknown;
  try {
    list = JSON.parse(text);
  } catch (err) {
    throw new InvalidArgument(`${what}: ${DELETED_FILES} is not JSON: ${(err as Error).message}`);
  }
  if (Array.isArray(list) && list.length > MAX_DELETED_FILES) {
    throw new InvalidArgument(`${what}: ${DELETED_FILES} lists ${list.length} paths, more than the ${MAX_DELETED_FILES} a restore applies`);
  }
  if (!Array.isArray(list) || !list.every((p): p is string => typeof p === 'string' && p.startsWith('/'))) {
    throw new InvalidArgument(`${what}: ${DELETED_FILES} is not a list of absolute paths`);
  }
  return list;
}

/** An archive unpacked for a restore. */
export interface UnpackedCheckpoint {
  /** CRIU's images. */
  images: string;
  config: RestoreConfigDump;
  /** rootfs-diff.tar, when the container changed files. */
  rootfsDiff?: string;
  /** Paths of the image the container deleted. */
  deleted: string[];
}

/**
 * The base image's names in config.dump, read without unpacking anything else (the archive is decided on before
 * a container is made). InvalidArgument when the file is not a checkpoint archive.
 */
export async function peekCheckpointImage(archive: string, maxBytes: number): Promise<RestoreConfigDump> {
  const what = `checkpoint archive ${archive}`;
  let found: string | undefined;
  // Read only up to config.dump: the rest (every memory page) is for unpackCheckpointArchive.
  await readArchive(archive, maxBytes, what, async (name, header, body) => {
    if (archiveEntryAction(name, header.type, what) !== 'take' || memberPath(name, what).join('/') !== CONFIG_DUMP) return 'next';
    found = await readSmall(body, header.size ?? 0, what);
    return 'stop';
  });
  if (found === undefined) throw new InvalidArgument(`${what} has no ${CONFIG_DUMP}: it is not a container checkpoint in CRI-O's layout`);
  return parseConfigDump(found, what);
}

/**
 * Unpacks what a restore needs of `archive` into the empty directory `dir`, in one pass: InvalidArgument for
 * anything that is not a whole checkpoint of CRI-O's layout, or that is bigger than `maxBytes`.
 */
export async function unpackCheckpointArchive(archive: string, dir: string, maxBytes: number): Promise<UnpackedCheckpoint> {
  const what = `checkpoint archive ${archive}`;
  const taken = new Set<string>();
  await mkdir(dir, { mode: 0o700 });
  await readArchive(archive, maxBytes, what, async (name, header, body) => {
    if (archiveEntryAction(name, header.type, what) === 'skip') return;
    const parts = memberPath(name, what);
    const member = parts.join('/');
    if ((member === CONFIG_DUMP || member === DELETED_FILES) && (header.size ?? 0) > MAX_JSON_BYTES) {
      throw new InvalidArgument(`${what}: ${member} is ${header.size} bytes, more than the ${MAX_JSON_BYTES} (16 MiB) a restore reads`);
    }
    const path = join(dir, ...parts);
    if (header.type === 'directory') {
      await mkdir(path, { recursive: true, mode: 0o700 });
    } else {
      if (parts.length > 1) await mkdir(join(dir, ...parts.slice(0, -1)), { recursive: true, mode: 0o700 });
      // 'wx': a name met twice is refused rather than written over.
      const fh = await open(path, 'wx', 0o600).catch((err: NodeJS.ErrnoException) => {
        throw err.code === 'EEXIST' ? new InvalidArgument(`${what}: entry "${name}" appears twice`) : err;
      });
      await pipeline(body, fh.createWriteStream());
    }
    taken.add(parts.join('/'));
  });
  const missing = [CONFIG_DUMP, `${CHECKPOINT_DIR}/inventory.img`].filter((m) => !taken.has(m));
  if (missing.length > 0) {
    throw new InvalidArgument(`${what} has no ${missing.join(' and no ')}: it is not a container checkpoint in CRI-O's layout`);
  }
  const json = (member: string) => readFile(join(dir, member), 'utf8');
  return {
    images: join(dir, CHECKPOINT_DIR),
    config: parseConfigDump(await json(CONFIG_DUMP), what),
    ...(taken.has(ROOTFS_DIFF_TAR) ? { rootfsDiff: join(dir, ROOTFS_DIFF_TAR) } : {}),
    deleted: taken.has(DELETED_FILES) ? parseDeletedFiles(await json(DELETED_FILES), what) : [],
  };
}

/** What an entry's handler may ask: 'stop' ends the reading there (the file is not read further). */
type Entry = (name: string, header: tar.Header, body: AsyncIterable<Buffer> & NodeJS.ReadableStream) => Promise<void | 'next' | 'stop'>;

/**
 * Every entry of a plain tar through `each` (which must read or leave its body) until one answers 'stop'; the
 * budget counts what they hold.
 */
async function readArchive(archive: string, maxBytes: number, what: string, each: Entry): Promise<void> {
  const st = lstatSync(archive, { throwIfNoEntry: false });
  if (!st?.isFile()) throw new InvalidArgument(`${what} is not a regular file`);
  if (st.size > maxBytes) {
    throw new InvalidArgument(`${what} is ${st.size} bytes, more than restore.max_archive_bytes (${maxBytes}); nothing was unpacked`);
  }
  const extract = tar.extract();
  const feeding = pipeline(createReadStream(archive), extract);
  feeding.catch(() => undefined);
  let total = 0;
  try {
    for await (const entry of extract) {
      total += entry.header.size ?? 0;
      if (total > maxBytes) throw new InvalidArgument(`${what} holds more than restore.max_archive_bytes (${maxBytes})`);
      if (await each(entry.header.name, entry.header, entry as unknown as AsyncIterable<Buffer> & NodeJS.ReadableStream) === 'stop') {
        // The pipeline destroys the file's stream with the extractor: nothing more is read.
        extract.destroy();
        await feeding.catch(() => undefined);
        return;
      }
      entry.resume();
    }
    await feeding;
  } catch (err) {
    extract.destroy();
    await feeding.catch(() => undefined);
    if (err instanceof MinicriError) throw err;
    throw new InvalidArgument(`${what} cannot be read as a tar archive: ${(err as Error).message}`, { cause: err });
  }
}

async function readSmall(body: AsyncIterable<Buffer>, size: number, what: string): Promise<string> {
  if (size > MAX_JSON_BYTES) throw new InvalidArgument(`${what}: ${CONFIG_DUMP} is ${size} bytes, too big to be one`);
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(c);
  return Buffer.concat(chunks).toString('utf8');
}

/** The kinds of entry a rootfs diff may hold: what a container makes in its own files. Pure. */
export function diffEntryPath(name: string, type: string | null | undefined, what: string): string[] {
  const parts = memberPath(name, what);
  if (parts.some((p) => p.startsWith(WHITEOUT_PREFIX))) {
    throw new InvalidArgument(`${what}: entry "${name}" is a whiteout; deletions belong in ${DELETED_FILES}`);
  }
  if (!['file', 'contiguous-file', 'directory', 'symlink', 'link'].includes(type ?? '')) {
    throw new InvalidArgument(
      `${what}: entry "${name}" is a ${type ?? 'entry of unknown type'}; a restore makes no device nodes, fifos or sockets`);
  }
  return parts;
}

/**
 * Applies rootfs-diff.tar into the root filesystem `root` of a container that has not run yet (so nothing
 * moves under the checks): every parent is resolved inside `root` (a symlink to "/etc" means <root>/etc),
 * the entry itself is never followed, and hard links name files already inside it.
 */
export async function applyRootfsDiff(diffTar: string, root: string, maxBytes: number): Promise<void> {
  const what = `the rootfs diff of the checkpoint (${diffTar})`;
  let entries = 0;
  await readArchive(diffTar, maxBytes, what, async (name, h, body) => {
    if (++entries % ENTRIES_PER_TURN === 0) await nextTurn();
    const parts = diffEntryPath(name, h.type, what);
    if (parts.length === 0) return;
    const path = join(dirInRoot(root, parts.slice(0, -1), what, true), parts[parts.length - 1]!);
    const existing = await lstat(path).catch(() => undefined);
    if (existing && !(h.type === 'directory' && existing.isDirectory())) await rm(path, { recursive: true, force: true });
    switch (h.type) {
      case 'directory':
        if (!existing?.isDirectory()) await mkdir(path, { mode: 0o700 });
        break;
      case 'symlink':
        await symlink(h.linkname ?? '', path);
        break;
      case 'link': {
        const target = memberPath(h.linkname ?? '', what);
        const source = target.length > 0 ? join(dirInRoot(root, target.slice(0, -1), what, true), target[target.length - 1]!) : root;
        if (!(await lstat(source).catch(() => undefined))?.isFile()) {
          throw new InvalidArgument(`${what}: hard link "${name}" -> "${h.linkname}" names no file inside the container's root`);
        }
        await link(source, path);
        return;
      }
      default: {
        const fh = await open(path, 'wx', 0o600);
        await pipeline(body, fh.createWriteStream());
      }
    }
    await lchown(path, h.uid ?? 0, h.gid ?? 0);
    // chown clears setuid and setgid: the mode comes after it (a symlink has none of its own).
    if (h.type !== 'symlink') await chmod(path, (h.mode ?? 0o644) & 0o7777);
    const mtime = h.mtime ?? new Date();
    await lutimes(path, mtime, mtime);
  });
}

/** Removes the image's files the checkpointed container had deleted, each resolved inside `root`. */
export async function removeDeletedFiles(root: string, paths: readonly string[]): Promise<void> {
  const what = 'the deleted files of the checkpoint';
  for (const [i, p] of paths.entries()) {
    if (i % ENTRIES_PER_TURN === ENTRIES_PER_TURN - 1) await nextTurn();
    const parts = confine(p);
    if (parts.length === 0) continue;
    const parent = dirInRoot(root, parts.slice(0, -1), what, false);
    if (parent === undefined) continue; // gone with its parent already
    await rm(join(parent, parts[parts.length - 1]!), { recursive: true, force: true });
  }
}

