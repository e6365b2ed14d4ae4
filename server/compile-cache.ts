// Whether V8's compile cache directory may be used: Node runs the code it finds there, so each directory from
// the first one given down must be a real directory (no symbolic link, which could lead anywhere), root's,
// and writable by root alone. main.ts loads this before anything else: node:fs only, nothing more.
import { chmodSync, lstatSync, mkdirSync, type Stats } from 'node:fs';
import { join } from 'node:path';

/** What the decision needs of an lstat. */
export type DirFacts = Pick<Stats, 'uid' | 'mode' | 'isDirectory' | 'isSymbolicLink'>;

/** Why `path`, as lstat saw it, may not hold code V8 will run; undefined when it may. */
export function distrust(path: string, st: DirFacts): string | undefined {
  if (st.isSymbolicLink()) return `${path} is a symbolic link`;
  if (!st.isDirectory()) return `${path} is not a directory`;
  if (st.uid !== 0) return `${path} belongs to uid ${st.uid}, not root`;
  if ((st.mode & 0o022) !== 0) return `${path} is writable by its group or others (mode ${(st.mode & 0o7777).toString(8)})`;
  return undefined;
}

/**
 * Readies `base`/`names…` for the compile cache: each directory below `base` that is missing is made 0700, and
 * the last one is left 0700. Undefined when it may be used, else why not. Filesystem errors (a read-only or
 * missing `base`) are thrown.
 */
export function prepareCompileCacheDir(base: string, ...names: string[]): string | undefined {
  let path = base;
  for (let i = 0; ; path = join(path, names[i++]!)) {
    const st = i === 0 ? lstatSync(path) : lstatOrMake(path);
    const why = distrust(path, st);
    if (why) return why;
    if (i === names.length) {
      if ((st.mode & 0o7777) !== 0o700) chmodSync(path, 0o700);
      return undefined;
    }
  }
}

function lstatOrMake(path: string): Stats {
  try {
    return lstatSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  try {
    mkdirSync(path, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err; // another minicri command made it meanwhile
  }
  return lstatSync(path);
}
