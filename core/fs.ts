// Small file-system questions asked all over the tree.
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { open, rename, rm, stat, writeFile, type FileHandle } from 'node:fs/promises';
import path from 'node:path';

/** Whether `path` names something (a link is followed); any failure to stat it counts as no. */
export function exists(path: string): Promise<boolean> {
  return stat(path).then(() => true, () => false);
}

/** Writes `data` to `file` atomically: a temp file beside it (`.tmp-*`), then a rename over the target. */
export async function writeFileAtomic(file: string, data: string | Buffer, mode = 0o600): Promise<void> {
  const tmp = path.join(path.dirname(file), `.tmp-${randomBytes(6).toString('hex')}`);
  try {
    await writeFile(tmp, data, { mode });
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

/**
 * A directory held open: names are resolved in it through its descriptor (/proc/self/fd), so whatever replaces
 * its path meanwhile (a symlink, another directory) is never written or removed through. Identified by dev and ino.
 */
export interface HeldDir {
  readonly dev: number;
  readonly ino: number;
  readonly uid: number;
  readonly mode: number;
  /** `name` (one component, or '' for the directory itself) in this directory, whatever its path is now. */
  at(name: string): string;
  close(): Promise<void>;
}

/**
 * Opens the directory at `path`. With `follow: false` its last component must not be a symlink (ELOOP); earlier
 * components are resolved as usual. ENOTDIR when it is not a directory.
 */
export async function holdDir(path: string, { follow }: { follow: boolean }): Promise<HeldDir> {
  const flags = constants.O_RDONLY | constants.O_DIRECTORY | (follow ? 0 : constants.O_NOFOLLOW);
  const handle: FileHandle = await open(path, flags);
  try {
    const st = await handle.stat();
    return {
      dev: st.dev, ino: st.ino, uid: st.uid, mode: st.mode,
      at: (name) => (name ? `/proc/self/fd/${handle.fd}/${name}` : `/proc/self/fd/${handle.fd}`),
      close: () => handle.close(),
    };
  } catch (err) {
    await handle.close();
    throw err;
  }
}

/** Creates `path` (a new file, never through a symlink: O_EXCL) for writing. */
export function createExclusive(path: string, mode = 0o600): Promise<FileHandle> {
  return open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
}
