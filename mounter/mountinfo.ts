// Reading /proc/<pid>/mountinfo: which paths are mount points.

/** Every mount point (absolute, normalised) of a /proc/<pid>/mountinfo text: one reading answers for many paths. */
export function mountPoints(mountinfo: string): Set<string> {
  const points = new Set<string>();
  for (const line of mountinfo.split('\n')) {
    const mountPoint = line.split(' ')[4];
    if (mountPoint !== undefined) points.add(unescapeMountinfo(mountPoint));
  }
  return points;
}

/** mountinfo writes space, tab, newline and backslash as 3-digit octal escapes. */
function unescapeMountinfo(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

