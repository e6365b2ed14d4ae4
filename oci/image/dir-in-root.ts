// The real directory a path names inside a root being filled from a tar stream (an image layer, a checkpoint's
// rootfs diff): symlinks met on the way are followed only within the root, synchronously, since nothing else
// changes the tree while it is filled and the layer unpacker calls this for every entry.
import { lstatSync, mkdirSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { InvalidArgument } from '../../core/errors.js';
import { symlinkTarget } from './layerpath.js';

/** Symlinks followed in one resolution: the kernel's own limit for a path lookup. */
const MAX_SYMLINK_HOPS = 40;

/**
 * The real directory for `parts` (confined components) under `root`: a symlink to "/etc" means <root>/etc. A
 * missing directory is made when `create`, else the answer is undefined. Anything else in the way, or more than
 * MAX_SYMLINK_HOPS links, is an InvalidArgument naming `what`. `known` holds real directories already seen under
 * `root` (never symlinks): they are taken without a lookup, and the ones this walk finds or makes are added.
 */
export function dirInRoot(root: string, parts: readonly string[], what: string, create: true, known?: Set<string>): string;
export function dirInRoot(root: string, parts: readonly string[], what: string, create: boolean, known?: Set<string>): string | undefined;
export function dirInRoot(root: string, parts: readonly string[], what: string, create: boolean, known?: Set<string>): string | undefined {
  let done: string[] = [];
  let todo = [...parts];
  let hops = 0;
  while (todo.length > 0) {
    const next = [...done, todo.shift()!];
    const path = join(root, ...next);
    if (known?.has(path)) {
      done = next;
      continue;
    }
    const st = lstatSync(path, { throwIfNoEntry: false });
    if (!st) {
      if (!create) return undefined;
      mkdirSync(path, { mode: 0o755 });
      known?.add(path);
      done = next;
    } else if (st.isSymbolicLink()) {
      if (++hops > MAX_SYMLINK_HOPS) throw new InvalidArgument(`${what}: too many symlinks resolving "${parts.join('/')}"`);
      todo = [...symlinkTarget(done, readlinkSync(path)), ...todo];
      done = [];
    } else if (st.isDirectory()) {
      known?.add(path);
      done = next;
    } else {
      throw new InvalidArgument(`${what}: "${next.join('/')}" is not a directory but has entries under it`);
    }
  }
  return join(root, ...done);
}
