// CheckpointPod's output directory, the caller's, which others (a pod sharing it) may write in meanwhile. It is
// opened once (never through a symlink) and held; everything is written and removed through its descriptor, so
// a path swapped meanwhile (the directory, or containers/ in it, for a symlink) is never followed. containers/,
// made by the call that claims the directory, is its mark: a second call on the same directory is refused and
// removes nothing; the failing call removes only what it made. Recovery removes only what it finds to be the
// same directories (dev and ino, in the intent) the call made.
import { mkdir, lstat, readdir, rm, rmdir } from 'node:fs/promises';
import { FailedPrecondition, InvalidArgument } from '../core/errors.js';
import { createExclusive, holdDir, type HeldDir } from '../core/fs.js';
import { CONTAINERS_DIR, POD_MANIFEST } from './pod-checkpoint-manifest.js';
import type { OutputIdentity } from './records.js';

/** An output directory claimed by one call: held open, with the containers/ it made, and whether it wrote pod.json. */
export interface ClaimedOutput {
  path: string;
  out: HeldDir;
  containers: HeldDir;
  /** Set before pod.json is created. */
  manifest: boolean;
}

/** The output directory held open: INVALID_ARGUMENT unless it is an existing empty directory (not a symlink to one). */
export async function openOutputDir(path: string): Promise<HeldDir> {
  const out = await holdDir(path, { follow: false }).catch(async (err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') {
      throw new InvalidArgument(`output_path ${path} does not exist: create an empty directory for the checkpoint`);
    }
    if (err.code !== 'ENOTDIR' && err.code !== 'ELOOP') throw err;
    // With O_DIRECTORY a symlink is refused as ENOTDIR too: told apart only for the message.
    if ((await lstat(path).catch(() => undefined))?.isSymbolicLink()) {
      throw new InvalidArgument(`output_path ${path} is a symlink: give the directory itself`);
    }
    throw new InvalidArgument(`output_path ${path} is not a directory`);
  });
  try {
    const inside = await readdir(out.at(''));
    if (inside.length > 0) {
      const some = `${inside.slice(0, 3).join(', ')}${inside.length > 3 ? ', ...' : ''}`;
      throw new InvalidArgument(`output_path ${path} is not empty (${some}): give an empty directory`);
    }
    return out;
  } catch (err) {
    await out.close();
    throw err;
  }
}

/**
 * Claims the empty directory at `path`: containers/ is made in it (a second claim finds it: refused, nothing
 * removed) and held open; it must be the directory just made (ours, root's alone, empty). A crash between this
 * and the intent's write leaves that empty directory, no more.
 */
export async function claimOutputDir(path: string): Promise<ClaimedOutput> {
  const out = await openOutputDir(path);
  try {
    await mkdir(out.at(CONTAINERS_DIR), { mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
      throw new InvalidArgument(`output_path ${path} is in use: another checkpoint began writing there; `
        + 'give an empty directory of its own');
    });
    const containers = await holdDir(out.at(CONTAINERS_DIR), { follow: false }).catch(() => undefined);
    const ours = containers && containers.uid === process.getuid?.() && (containers.mode & 0o777) === 0o700
      && (await readdir(containers.at(''))).length === 0;
    if (!containers || !ours) {
      await containers?.close();
      throw new FailedPrecondition(`output_path ${path} changed while the checkpoint began (its ${CONTAINERS_DIR}/ was replaced): `
        + 'give a directory no one else writes in');
    }
    return { path, out, containers, manifest: false };
  } catch (err) {
    await out.close();
    throw err;
  }
}

export function identityOf(c: ClaimedOutput): OutputIdentity {
  return { dev: c.out.dev, ino: c.out.ino, containers: { dev: c.containers.dev, ino: c.containers.ino } };
}

/** pod.json, created (never replacing a file, never through a symlink) in the claimed directory. */
export async function writeManifest(c: ClaimedOutput, text: string): Promise<void> {
  const file = await createExclusive(c.out.at(POD_MANIFEST));
  try {
    await file.writeFile(text);
  } finally {
    await file.close();
  }
}

/** What the claiming call made: containers/ with what is in it, and pod.json when it wrote one. */
export async function removeClaimed(c: ClaimedOutput): Promise<void> {
  // containers/ is root's alone: only this call wrote in it.
  for (const name of await readdir(c.containers.at(''))) await rm(c.containers.at(name), { force: true });
  const named = await lstat(c.out.at(CONTAINERS_DIR)).catch(() => undefined);
  if (named?.dev === c.containers.dev && named.ino === c.containers.ino) await rmdir(c.out.at(CONTAINERS_DIR));
  if (c.manifest) await rm(c.out.at(POD_MANIFEST), { force: true });
}

export async function releaseClaimed(c: ClaimedOutput): Promise<void> {
  await Promise.all([c.out.close(), c.containers.close()]);
}

/**
 * The directories a cut-off call claimed, held again, when they are still the ones it made (a path now naming
 * anything else is left alone); undefined when they are gone or not the same.
 */
export async function reclaimOutput(path: string, id: OutputIdentity, manifest: boolean): Promise<ClaimedOutput | undefined> {
  const same = (d: HeldDir, want: { dev: number; ino: number }) => d.dev === want.dev && d.ino === want.ino;
  const out = await holdDir(path, { follow: false }).catch(() => undefined);
  if (!out || !same(out, id)) {
    await out?.close();
    return undefined;
  }
  const containers = await holdDir(out.at(CONTAINERS_DIR), { follow: false }).catch(() => undefined);
  if (!containers || !same(containers, id.containers)) {
    await Promise.all([out.close(), containers?.close()]);
    return undefined;
  }
  return { path, out, containers, manifest };
}
