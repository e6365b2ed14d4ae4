// A container's cgroups on the host, where runc made them: found from the spec's cgroupsPath in every
// mounted hierarchy (cgroup v1 controllers and the unified one), so that a container whose runc state is
// gone (a reboot emptied /run, or a crash) still has its cgroups removed, and orphans can be listed.
import { existsSync } from 'node:fs';
import { readdir, readFile, rmdir } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { Internal } from '../../core/errors.js';
import { cgroupsPath, type CgroupDriver } from './spec/cgroups.js';
import { exists } from '../../core/fs.js';

/** Scope name prefix under systemd: the scope is "<prefix>-<id>.scope" (as the spec's cgroupsPath says). */
const SCOPE = /^(.+)-([^-]+)\.scope$/;

/**
 * The directory a cgroupsPath names below a hierarchy's root: the path itself for the cgroupfs driver;
 * for systemd's "slice:prefix:name", the slice's nesting (a-b-c.slice lives in a.slice/a-b.slice/) and
 * the scope "prefix-name.scope".
 */
export function cgroupDir(cgroupsPath: string): string {
  if (cgroupsPath.startsWith('/')) return posix.normalize(cgroupsPath);
  const [slice = '', prefix = '', name = ''] = cgroupsPath.split(':');
  return posix.join('/', ...sliceNesting(slice), `${prefix}-${name}.scope`);
}

/** The directory, below each hierarchy's root, that holds the cgroups of a pod's pause and containers. */
export function podCgroupParentDir(driver: CgroupDriver, parent: string): string {
  return posix.dirname(cgroupDir(cgroupsPath(driver, parent, 'pod')));
}

/** "a-b-c.slice" → ["a.slice", "a-b.slice", "a-b-c.slice"]; the root "-.slice" is no directory. */
export function sliceNesting(slice: string): string[] {
  if (slice === '' || slice === '-.slice') return [];
  const parts = slice.replace(/\.slice$/, '').split('-');
  return parts.map((_, i) => `${parts.slice(0, i + 1).join('-')}.slice`);
}

/** The id a container cgroup's directory name carries: a 64-hex id itself, or systemd's scope of it. */
export function cgroupOwner(name: string): string | undefined {
  const scoped = SCOPE.exec(name)?.[2] ?? name;
  return /^[0-9a-f]{64}$/.test(scoped) ? scoped : undefined;
}

/** The mount points of every cgroup hierarchy of this mount namespace (v1 controllers, and unified). */
export async function cgroupHierarchies(): Promise<string[]> {
  const mountinfo = await readFile('/proc/self/mountinfo', 'utf8');
  const roots = new Set<string>();
  for (const line of mountinfo.split('\n')) {
    const [before, after] = line.split(' - ');
    const fstype = after?.split(' ')[0];
    if (fstype === 'cgroup' || fstype === 'cgroup2') roots.add(before!.split(' ')[4]!);
  }
  return [...roots].sort();
}

/** Whether a cgroup directory holds no process and no child cgroup (true when there is no such directory). */
export async function cgroupEmpty(dir: string): Promise<boolean> {
  const [procs, entries] = await Promise.all([
    readFile(join(dir, 'cgroup.procs'), 'utf8').catch(() => ''),
    readdir(dir, { withFileTypes: true }).catch(() => []),
  ]);
  return procs.trim() === '' && !entries.some((e) => e.isDirectory());
}

/** Removes a cgroup directory in every hierarchy; absent is fine, one still holding processes is an error. */
export async function removeCgroupDir(relative: string, hierarchies?: string[]): Promise<void> {
  for (const root of hierarchies ?? await cgroupHierarchies()) {
    const dir = join(root, relative);
    await rmdir(dir).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return;
      const why = err.code === 'EBUSY' ? 'processes are still in it' : err.message;
      throw new Internal(`cannot remove cgroup ${dir}: ${why}`, { cause: err });
    });
  }
}

/** The child cgroups of `relative`, in every hierarchy, that carry a container or sandbox id, and whether each is empty. */
export async function containerCgroupsBelow(
  relative: string, hierarchies?: string[],
): Promise<{ relative: string; owner: string; empty: boolean }[]> {
  const found = [];
  for (const root of hierarchies ?? await cgroupHierarchies()) {
    for (const entry of await readdir(join(root, relative), { withFileTypes: true }).catch(() => [])) {
      const owner = entry.isDirectory() ? cgroupOwner(entry.name) : undefined;
      if (!owner) continue;
      found.push({ relative: posix.join(relative, entry.name), owner, empty: await cgroupEmpty(join(root, relative, entry.name)) });
    }
  }
  return found;
}

/** Whether `relative` exists in any hierarchy. */
export async function cgroupExists(relative: string, hierarchies?: string[]): Promise<boolean> {
  for (const root of hierarchies ?? await cgroupHierarchies()) {
    if (await exists(join(root, relative))) return true;
  }
  return false;
}

/** Whether the node runs the unified cgroup hierarchy (cgroup v2) alone. */
export function unifiedCgroups(): boolean {
  return existsSync('/sys/fs/cgroup/cgroup.controllers');
}
