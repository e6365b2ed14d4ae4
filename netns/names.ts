// Pure helpers behind netns.ts: names and mountinfo parsing.

/** Prefix of every namespace pin minicri creates; recovery lists pins by it. */
export const NETNS_PREFIX = 'minicri-';

export function netnsPinName(hex: string): string {
  return `${NETNS_PREFIX}${hex}`;
}

/** `<pod name>-<hex>`; the pod name is made safe for a file name and kept short. */
export function netnsSymlinkName(podName: string, hex: string): string {
  const safe = podName.replace(/[^A-Za-z0-9._-]/g, '-').replace(/^[.-]+/, '').slice(0, 200) || 'pod';
  return `${safe}-${hex}`;
}

/** Whether `target` (absolute, normalised) is a mount point in a /proc/<pid>/mountinfo text. */
export function isMountPoint(mountinfo: string, target: string): boolean {
  for (const line of mountinfo.split('\n')) {
    const mountPoint = line.split(' ')[4];
    if (mountPoint !== undefined && unescapeMountinfo(mountPoint) === target) return true;
  }
  return false;
}

/** mountinfo writes space, tab, newline and backslash as 3-digit octal escapes. */
function unescapeMountinfo(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

