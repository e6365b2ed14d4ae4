// Bind-mount sources as the kernel will use them. A host path that is a symlink is resolved here, so
// the spec (and its propagation check) names the real mount, and what the container gets is fixed
// at creation rather than wherever the link points later. A missing source becomes a directory, as
// containerd and CRI-O do for hostPath volumes; the caller is told which directories were made.
import { mkdir, realpath } from 'node:fs/promises';
import type { Mount__Output } from '../../gen/runtime/v1/Mount.js';
import { InvalidArgument } from '../../core/errors.js';

/** The mounts with their sources resolved, and the top directory of each source that had to be made. */
export async function resolveMountSources(mounts: Mount__Output[]): Promise<{ mounts: Mount__Output[]; created: string[] }> {
  const created: string[] = [];
  const resolved = await Promise.all(mounts.map(async (m) => {
    if (!m.host_path) return m;
    try {
      return { ...m, host_path: await realpath(m.host_path) };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
        throw new InvalidArgument(`mount source ${m.host_path} cannot be resolved: ${(err as Error).message}`);
      }
      const first = await mkdir(m.host_path, { recursive: true, mode: 0o755 });
      if (first) created.push(first);
      return { ...m, host_path: await realpath(m.host_path) };
    }
  }));
  return { mounts: resolved, created };
}
