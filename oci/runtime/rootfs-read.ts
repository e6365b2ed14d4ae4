// Reads files of an image's root filesystem without letting the image choose what the daemon opens or
// how long it waits. A path resolves inside the root as it would in a chroot (openat2's RESOLVE_IN_ROOT;
// Node has no openat2, so one component at a time, each lookup on the thread pool and their number
// bounded); only a regular file is opened, with flags that cannot block or follow a link, and at most a
// cap is read. Nothing runs in a root filesystem while minicri reads it (the container is not created
// yet), so its links cannot change between the resolution and the open; the open is checked anyway.
import { constants, type Stats } from 'node:fs';
import { lstat, open, readlink } from 'node:fs/promises';
import path from 'node:path';
import { InvalidArgument } from '../../core/errors.js';

/** Symlinks followed in one resolution: the kernel's own limit for a path lookup. */
export const MAX_SYMLINKS = 40;
/** Path components visited in one resolution, those of link targets included. */
export const MAX_COMPONENTS = 4096;
/** The most minicri reads of one file of an image (passwd, group). */
export const ROOTFS_FILE_MAX_BYTES = 4 << 20;

/**
 * O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer (the file is
 * refused after fstat anyway). O_NOFOLLOW: a link at the last component fails the open. libuv adds
 * O_CLOEXEC to every open.
 */
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW | constants.O_NOCTTY;

const absent = (err: NodeJS.ErrnoException): boolean => err.code === 'ENOENT' || err.code === 'ENOTDIR';

/** The link text at `hostPath`; undefined when it is no symlink, null when it does not exist. */
async function linkAt(hostPath: string): Promise<string | undefined | null> {
  return readlink(hostPath).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'EINVAL') return undefined;
    if (absent(err)) return null;
    throw err;
  });
}

/**
 * The host path of `unsafePath` inside `root`, every symlink on the way resolved as the root's own: ".."
 * stops at the root and absolute targets start over from it, so the result never leaves `root`. The
 * result may not exist. `where` names the root in errors ("image busybox:1.36").
 */
export async function resolveInRoot(root: string, unsafePath: string, where: string): Promise<string> {
  const cleanRoot = path.resolve(root);
  const resolved: string[] = [];
  // Components still to visit, the next one last (a link's target is pushed in front in O(its length)).
  const pending = unsafePath.split('/').reverse();
  let links = 0;
  let visited = 0;
  let missing = false;
  while (pending.length > 0) {
    const part = pending.pop() as string;
    if (part === '' || part === '.') continue;
    if (++visited > MAX_COMPONENTS) {
      throw new InvalidArgument(
        `${unsafePath} of ${where} resolves through more than ${MAX_COMPONENTS} path components: fix the image's symbolic links`);
    }
    if (part === '..') {
      // Lexical: `missing/..` is the parent again (the kernel would say ENOENT; either way it stays in the root).
      resolved.pop();
      missing = false;
      continue;
    }
    // Under a component that does not exist nothing is a link: no lookup needed.
    const target = missing ? undefined : await linkAt(path.join(cleanRoot, ...resolved, part)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENAMETOOLONG') throw err;
      throw new InvalidArgument(
        `${unsafePath} of ${where} resolves to a path longer than the kernel allows: fix the image's symbolic links`);
    });
    if (target === null) missing = true;
    if (typeof target !== 'string') {
      resolved.push(part);
      continue;
    }
    if (++links > MAX_SYMLINKS) {
      throw new InvalidArgument(
        `${unsafePath} of ${where} goes through more than ${MAX_SYMLINKS} symbolic links (a loop?): fix the image's symbolic links`);
    }
    if (target.startsWith('/')) resolved.length = 0;
    pending.push(...target.split('/').reverse());
  }
  return path.join(cleanRoot, ...resolved);
}

function kind(st: Stats): string {
  if (st.isFIFO()) return 'a FIFO';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSocket()) return 'a socket';
  if (st.isDirectory()) return 'a directory';
  if (st.isSymbolicLink()) return 'a symbolic link';
  return 'not a plain file';
}

function mustBeRegular(st: Stats, file: string, where: string, maxBytes: number, fix: string): void {
  if (!st.isFile()) {
    throw new InvalidArgument(`${file} of ${where} is ${kind(st)}, not a regular file: minicri reads only regular files; ${fix}`);
  }
  if (st.size > maxBytes) {
    throw new InvalidArgument(`${file} of ${where} is ${st.size} bytes, more than the ${maxBytes} minicri reads: ${fix}`);
  }
}

/**
 * The text of `file` in the root filesystem `root` (see resolveInRoot), or undefined when it does not exist
 * there (a dangling link included). Anything but a regular file of at most `maxBytes` is an InvalidArgument
 * naming the file, `where`, what is wrong and how to `fix` it; a device or FIFO is never opened. Also for other
 * trees someone else writes (a pod checkpoint's directory).
 */
export async function readRootfsFile(
  root: string, file: string, where: string, maxBytes = ROOTFS_FILE_MAX_BYTES, fix = 'fix the image',
): Promise<string | undefined> {
  const hostPath = await resolveInRoot(root, file, where);
  const seen = await lstat(hostPath).catch((err: NodeJS.ErrnoException) => {
    if (absent(err)) return undefined;
    throw err;
  });
  if (!seen) return undefined;
  mustBeRegular(seen, file, where, maxBytes, fix);
  const fh = await open(hostPath, OPEN_FLAGS).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ELOOP') throw new InvalidArgument(`${file} of ${where} changed into a symbolic link while minicri read it`);
    throw err;
  });
  try {
    const st = await fh.stat();
    mustBeRegular(st, file, where, maxBytes, fix);
    if (st.ino !== seen.ino || st.dev !== seen.dev) throw new InvalidArgument(`${file} of ${where} was replaced while minicri read it`);
    // One byte more than the size tells a file that grew past the cap from one that is exactly at it.
    const buf = Buffer.alloc(st.size + 1);
    let filled = 0;
    for (;;) {
      const { bytesRead } = await fh.read(buf, filled, buf.length - filled, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
      if (filled === buf.length) {
        throw new InvalidArgument(`${file} of ${where} grew while minicri read it`);
      }
    }
    return buf.subarray(0, filled).toString('utf8');
  } finally {
    await fh.close();
  }
}
