// Writing a checkpoint archive (layout in checkpoint-layout.ts): the container's files beside CRIU's images
// in a work dir, then one tar at the requested location. GNU tar does the tar work: it keeps owners, modes,
// xattrs (file capabilities), hard links, sparse files and special files as they are.
import { randomBytes } from 'node:crypto';
import { lstat, link, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { getAttribute } from '@napi-rs/xattr';
import { DeadlineExceeded, FailedPrecondition, Internal, InvalidArgument, ResourceExhausted } from '../../core/errors.js';
import { createExclusive, holdDir } from '../../core/fs.js';
import { run } from '../../core/spawn.js';
import {
  archiveMembers, bindMountsDump, configDump, rootfsDiff,
  BIND_MOUNTS, CONFIG_DUMP, DELETED_FILES, ROOTFS_DIFF_TAR, SPEC_DUMP,
  type CheckpointedContainer, type SpecMount, type UpperEntry,
} from './checkpoint-layout.js';
import type { Spec } from './spec/types.js';

/** config.dump, spec.dump and (with bind mounts) bind.mounts, into `dir`. */
export async function writeCheckpointFiles(
  dir: string, c: CheckpointedContainer, bundle: { text: string; spec: Spec }, now: Date,
): Promise<void> {
  const mounts = bundle.spec.mounts ?? [];
  const sources = [...new Set(mounts.flatMap((m) => (m.source ? [m.source] : [])))];
  const stats = new Map(await Promise.all(sources.map(async (s) => [s, await stat(s).catch(() => undefined)] as const)));
  const binds = bindMountsDump(mounts, (source) => {
    const st = stats.get(source);
    return st && { isDirectory: st.isDirectory(), mode: st.mode };
  });
  await Promise.all([
    writeFile(join(dir, CONFIG_DUMP), JSON.stringify(configDump(c, now), null, 2)),
    writeFile(join(dir, SPEC_DUMP), bundle.text),
    binds.length > 0 ? writeFile(join(dir, BIND_MOUNTS), JSON.stringify(binds, null, 2)) : undefined,
  ]);
}

/** The overlay upper dir's entries, parents before children, whiteouts and opaque dirs told apart. */
export async function scanUpper(upper: string): Promise<UpperEntry[]> {
  const out: UpperEntry[] = [];
  const walk = async (rel: string): Promise<void> => {
    for (const name of (await readdir(join(upper, rel))).sort()) {
      const path = rel ? `${rel}/${name}` : name;
      const full = join(upper, path);
      const st = await lstat(full);
      if (st.isCharacterDevice() && st.rdev === 0) {
        out.push({ path, kind: 'whiteout' });
      } else if (st.isDirectory()) {
        const opaque = (await getAttribute(full, 'trusted.overlay.opaque').catch(() => null))?.toString() === 'y';
        out.push({ path, kind: opaque ? 'opaque-dir' : 'other' });
        await walk(path);
      } else {
        out.push({ path, kind: 'other' });
      }
    }
  };
  await walk('');
  return out;
}

/** rootfs-diff.tar and deleted.files into `dir`, each only when the container changed something of that kind. */
export async function writeRootfsDiff(upper: string, dir: string, mounts: readonly SpecMount[], signal: AbortSignal): Promise<void> {
  const { include, deleted } = rootfsDiff(await scanUpper(upper), mounts);
  if (deleted.length > 0) await writeFile(join(dir, DELETED_FILES), JSON.stringify(deleted, null, 2));
  if (include.length === 0) return;
  // trusted.* are overlayfs's own marks (opaque dirs are in deleted.files instead).
  await tar(['--create', `--file=${join(dir, ROOTFS_DIFF_TAR)}`, `--directory=${upper}`, '--no-recursion', '--numeric-owner',
    '--xattrs', '--xattrs-exclude=trusted.*', '--null', '--files-from=-'],
  'the root filesystem changes', signal, `${include.join('\0')}\0`);
}

/**
 * The archive of everything in `dir` at `location`, readable by root alone (it holds every memory page of the
 * container). Written beside it under a temporary name and linked into place, so `location` is either
 * absent or whole, and never replaces a file that appeared meanwhile. The directory is held open from the start
 * and tar writes to the file this created (O_EXCL), through its descriptor: a path swapped meanwhile (for a symlink to another directory or
 * file) is never written through.
 */
export async function writeArchive(dir: string, location: string, signal: AbortSignal): Promise<void> {
  const members = archiveMembers(new Set(await readdir(dir)));
  const into = await holdDir(dirname(location), { follow: true });
  const partial = into.at(`.${basename(location)}.${randomBytes(4).toString('hex')}.partial`);
  try {
    const file = await createExclusive(partial);
    try {
      // The open file itself (this process's descriptor), not its name, which could be swapped meanwhile.
      const args = ['--create', `--file=/proc/${process.pid}/fd/${file.fd}`, `--directory=${dir}`, '--sort=name', '--numeric-owner',
        '--xattrs', '--', ...members];
      await tar(args, 'the checkpoint archive', signal);
      // The name may have been given to another file meanwhile: only the one written is linked into place.
      const [written, named] = await Promise.all([file.stat(), lstat(partial).catch(() => undefined)]);
      if (named?.ino !== written.ino || named.dev !== written.dev) {
        throw new FailedPrecondition(`the directory of ${location} changed while the checkpoint was written: `
          + 'its temporary file was replaced; write checkpoints where no one else writes');
      }
      await link(partial, into.at(basename(location))).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'EEXIST') {
          throw new InvalidArgument(`checkpoint location ${location} was created while the checkpoint was written: choose a new path`);
        }
        throw err;
      });
    } finally {
      await file.close();
      await rm(partial, { force: true });
    }
  } finally {
    await into.close();
  }
}

async function tar(args: string[], what: string, signal: AbortSignal, input?: string): Promise<void> {
  const r = signal.aborted ? undefined : await run('tar', args, { signal, input }).catch((err: Error) => {
    throw new FailedPrecondition(`writing ${what}: cannot run tar (${err.message}): install tar on the node`);
  });
  if (!r || signal.aborted) throw new DeadlineExceeded(`writing ${what} did not finish before the checkpoint's timeout`);
  if (r.code !== 0) throw tarError(what, r.stderr.trim());
}

/** tar's failure by its cause: a full disk or a directory it may not write in is the node's, not a bug. Pure. */
export function tarError(what: string, stderr: string): Error {
  const text = `writing ${what} with tar failed: ${stderr}`;
  if (/No space left on device|Disk quota exceeded/.test(stderr)) return new ResourceExhausted(`${text}; free space there`);
  if (/Permission denied|Read-only file system/.test(stderr)) return new FailedPrecondition(`${text}; give a writable directory`);
  return new Internal(text);
}
