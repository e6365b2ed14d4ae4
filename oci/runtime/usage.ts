// Bytes and inodes a directory tree uses (a container's writable layer), without following links.
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';

export async function diskUsage(dir: string): Promise<{ bytes: number; inodes: number }> {
  let bytes = 0;
  let inodes = 0;
  const seen = new Set<number>();
  async function walk(path: string): Promise<void> {
    const st = await lstat(path).catch(() => undefined);
    if (!st) return;
    // Hard links count once.
    if (st.nlink > 1 && !st.isDirectory()) {
      if (seen.has(st.ino)) return;
      seen.add(st.ino);
    }
    inodes += 1;
    bytes += st.blocks * 512;
    if (st.isDirectory()) {
      for (const name of await readdir(path).catch(() => [] as string[])) await walk(join(path, name));
    }
  }
  await walk(dir);
  return { bytes, inodes };
}
