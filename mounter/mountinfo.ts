// Reading /proc/<pid>/mountinfo: which paths are mount points.

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

