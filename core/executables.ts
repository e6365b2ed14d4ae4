// Finding programs the way a shell does: conmon wants absolute paths, and Status reports missing ones.
import { statSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';

/**
 * Whether `file` is a regular file root may execute (any execute bit). Synchronous and without throwing:
 * Status asks on every call, a local stat takes microseconds where a thread-pool trip takes tens, and a
 * thrown ENOENT per missing candidate cost more than the stat itself.
 */
export function isExecutableFile(file: string): boolean {
  try {
    const st = statSync(file, { throwIfNoEntry: false });
    return st !== undefined && st.isFile() && (st.mode & 0o111) !== 0;
  } catch {
    return false; // ENOTDIR, EACCES: not a program we can run
  }
}

/**
 * The first of `candidates` that is executable. The last hit for the same key is tried first, so a
 * search that keeps finding the same file costs one stat instead of one per directory before it.
 */
export function findExecutable(key: string, candidates: readonly string[]): string | undefined {
  const last = lastHit.get(key);
  if (last !== undefined && isExecutableFile(last) && candidates.includes(last)) return last;
  const found = candidates.find(isExecutableFile);
  if (found === undefined) lastHit.delete(key);
  else lastHit.set(key, found);
  return found;
}
const lastHit = new Map<string, string>();

/** The absolute path `command` names, directly or through PATH, if it is executable. */
export function resolveExecutable(command: string): string | undefined {
  if (isAbsolute(command)) return isExecutableFile(command) ? command : undefined;
  const dirs = (process.env.PATH ?? '').split(delimiter).filter(Boolean);
  return findExecutable(`PATH:${command}`, dirs.map((dir) => join(dir, command)));
}
