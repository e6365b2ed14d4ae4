// Pure path logic for unpacking layers: every tar entry name and link target is confined to the layer root,
// and OCI whiteout markers are recognized so they can become overlayfs whiteouts.
import { InvalidArgument } from '../../core/errors.js';

export const WHITEOUT_PREFIX = '.wh.';
export const OPAQUE_MARKER = '.wh..wh..opq';

/**
 * Lexically cleans a path and confines it to the root: absolute paths are taken relative to the root and ".."
 * never climbs above it (as if the root were "/"). Returns the components; [] is the root itself.
 */
export function confine(path: string, base: readonly string[] = []): string[] {
  const out = path.startsWith('/') ? [] : [...base];
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') out.pop();
    else out.push(part);
  }
  return out;
}

/** Where a symlink found at `linkParent` (components) points, confined to the layer root. */
export function symlinkTarget(linkParent: readonly string[], target: string): string[] {
  return confine(target, linkParent);
}

export type EntryKind =
  | { kind: 'normal'; path: string[] }
  | { kind: 'whiteout'; dir: string[]; name: string }
  | { kind: 'opaque'; dir: string[] }
  /** Other ".wh..wh." names are aufs bookkeeping that has no meaning in an OCI image. */
  | { kind: 'ignore' };

export function classifyEntry(name: string): EntryKind {
  const path = confine(name);
  const base = path[path.length - 1];
  if (base === undefined || !base.startsWith(WHITEOUT_PREFIX)) return { kind: 'normal', path };
  const dir = path.slice(0, -1);
  if (base === OPAQUE_MARKER) return { kind: 'opaque', dir };
  if (base.startsWith(`${WHITEOUT_PREFIX}${WHITEOUT_PREFIX}`)) return { kind: 'ignore' };
  const target = base.slice(WHITEOUT_PREFIX.length);
  if (target === '' || target === '.' || target === '..') throw new InvalidArgument(`layer entry "${name}" is a whiteout of nothing`);
  return { kind: 'whiteout', dir, name: target };
}

/** Extended attributes an image may carry: user.* and security.* (e.g. file capabilities), never trusted.*. */
export function xattrAllowed(name: string): boolean {
  return name.startsWith('user.') || name.startsWith('security.');
}
