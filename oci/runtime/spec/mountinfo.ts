// /proc/self/mountinfo parsing and the propagation questions containerd asks before it grants
// rshared/rslave bind mounts (a shared mount inside the container is useless, and possibly
// confusing, when the host side does not propagate).
import { InvalidArgument } from '../../../core/errors.js';

export interface MountInfo {
  mountPoint: string;
  /** Optional fields such as "shared:1" or "master:3". */
  optional: string[];
  fsType: string;
  source: string;
}

// The kernel escapes space, tab, newline and backslash in paths as \ooo octal.
const unescape = (s: string): string => s.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(parseInt(o, 8)));

/** Parses mountinfo text; lines that do not follow proc(5)'s layout are skipped. */
export function parseMountInfo(text: string): MountInfo[] {
  const out: MountInfo[] = [];
  for (const line of text.split('\n')) {
    const f = line.split(' ');
    const sep = f.indexOf('-', 6);
    if (f.length < 10 || sep < 0 || f[4] === undefined) continue;
    out.push({
      mountPoint: unescape(f[4]),
      optional: f.slice(6, sep).filter((x) => x !== ''),
      fsType: f[sep + 1] ?? '',
      source: unescape(f[sep + 2] ?? ''),
    });
  }
  return out;
}

const within = (path: string, mountPoint: string): boolean =>
  mountPoint === '/' || path === mountPoint || path.startsWith(`${mountPoint}/`);

/**
 * The mount a (symlink-resolved, absolute) host path lives on: the deepest mount point containing
 * it, the last one listed when mounts are stacked on the same point.
 */
export function mountOf(path: string, mounts: readonly MountInfo[]): MountInfo | undefined {
  let best: MountInfo | undefined;
  for (const m of mounts) {
    if (!within(path, m.mountPoint)) continue;
    if (!best || m.mountPoint.length >= best.mountPoint.length) best = m;
  }
  return best;
}

function propagationOf(path: string, mounts: readonly MountInfo[]): { shared: boolean; slave: boolean } {
  const m = mountOf(path, mounts);
  if (!m) throw new InvalidArgument(`host path "${path}" is on no mount listed in mountinfo: check the path exists`);
  return {
    shared: m.optional.some((o) => o.startsWith('shared:')),
    slave: m.optional.some((o) => o.startsWith('master:')),
  };
}

/** Bidirectional propagation needs the host mount to be shared. */
export function ensureShared(path: string, mounts: readonly MountInfo[]): void {
  if (!propagationOf(path, mounts).shared) {
    throw new InvalidArgument(
      `path "${path}" is mounted on a private mount: Bidirectional propagation needs a shared mount (mount --make-rshared on the host)`,
    );
  }
}

/** Host-to-container propagation needs the host mount to be shared or a slave. */
export function ensureSharedOrSlave(path: string, mounts: readonly MountInfo[]): void {
  const p = propagationOf(path, mounts);
  if (!p.shared && !p.slave) {
    throw new InvalidArgument(
      `path "${path}" is mounted on a private mount: ` +
        'HostToContainer propagation needs a shared or slave mount (mount --make-rshared on the host)',
    );
  }
}
