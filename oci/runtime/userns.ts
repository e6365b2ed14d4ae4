// Where the root filesystems of user-namespaced containers are staged. runc makes the container's root
// mount from inside the new user namespace, as the pod's root (an unprivileged id on the host), so every
// directory above it must be searchable by others: root_dir and state_dir are root's alone (0700). The
// staging dir sits beside state_dir (mode 0711, not listable); each container's entry in it is 0700 and
// owned by that pod's root, so no other pod can enter it. Its mounts live only from the spec's writing
// until `runc create` has made the container's own copies; the emptied `rootfs` directory stays until the
// container is removed, as runc starts each exec's process there (its cwd) before joining the container.
import { chown, mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { release } from 'node:os';
import { join, resolve } from 'node:path';
import { FailedPrecondition, Internal, NotFound } from '../../core/errors.js';
import { idmapMount, isMounted, mount, MountError, MS, unmountIfMounted } from '../../mounter/mounter.js';
import { parseMountInfo } from './spec/mountinfo.js';
import { idmapKernelProblem, podRootOnHost, type IdRange, type PodUserns, type StagedMount } from './spec/userns.js';

export function usernsStagingDir(stateDir: string): string {
  return `${resolve(stateDir)}-userns`;
}

/** The staging entry of a sandbox or container. */
export function usernsStagingEntry(stateDir: string, id: string): string {
  return join(usernsStagingDir(stateDir), id);
}

/**
 * Makes `entry` (0700, the pod root's) and each planned mount in it: the root filesystem bound as it is
 * when it is an overlay of id-mapped layers, everything else id-mapped with the pod's ids (submounts too).
 * A source that cannot be id-mapped (its filesystem, or one mounted below it, does not allow it) is refused,
 * naming the kernel release needed when that is the reason (tmpfs before Linux 6.3).
 */
export async function stageMounts(entry: string, mounts: readonly StagedMount[], userns: PodUserns): Promise<void> {
  const root = podRootOnHost(userns);
  await mkdir(entry, { mode: 0o700 });
  await chown(entry, root.uid, root.gid);
  for (const m of mounts) {
    const st = await stat(m.source).catch((err: Error) => {
      throw new NotFound(`mount source ${m.source} cannot be read: ${err.message}`);
    });
    if (st.isDirectory()) await mkdir(m.target);
    else await writeFile(m.target, '', { flag: 'wx' });
    try {
      if (m.kind === 'bind') await mount({ source: m.source, target: m.target, flags: MS.BIND });
      else await idmapMount(m.source, m.target, userns, { recursive: true });
    } catch (err) {
      if (err instanceof MountError && /: idmap: /.test(err.message)) {
        const kernel = idmapKernelProblem(m, parseMountInfo(await readFile('/proc/self/mountinfo', 'utf8')), release());
        if (kernel) throw new FailedPrecondition(`${kernel} (${err.message})`, { cause: err });
        throw new FailedPrecondition(
          `${m.source} cannot be id-mapped for a pod in its own user namespace ` +
            `(its filesystem, or one mounted below it, does not allow id-mapped mounts): ${err.message}`,
          { cause: err },
        );
      }
      throw err;
    }
  }
}

/**
 * Unmounts everything staged in `entry` and removes it (with `keepRoot`, all but the empty `rootfs`
 * directory); never deletes through a mount. Nothing to do when `entry` is gone.
 */
export async function unstageMounts(entry: string, opts: { keepRoot?: boolean } = {}): Promise<void> {
  const names = await readdir(entry).catch(() => [] as string[]);
  for (const name of names) {
    const target = join(entry, name);
    // Lazy: runc's copy is the container's own by now; stacked mounts are unmounted until none is left.
    for (let i = 0; i < 8; i++) if (!(await unmountIfMounted(target, { lazy: true }))) break;
    if (await isMounted(target)) throw new Internal(`staged mount ${target} is still mounted: not removing ${entry}`);
    if (!(opts.keepRoot && name === 'rootfs')) await rm(target, { recursive: true, force: true });
  }
  if (!opts.keepRoot) await rm(entry, { recursive: true, force: true });
}

/** Entries (sandbox and container ids) in the staging dir. */
export async function listStagingEntries(stateDir: string): Promise<string[]> {
  return readdir(usernsStagingDir(stateDir)).catch(() => [] as string[]);
}

/** A running process's uid_map as ranges (for doctor: does the pause have the pod's mappings?). */
export async function processUidMap(pid: number): Promise<IdRange[] | undefined> {
  const text = await readFile(`/proc/${pid}/uid_map`, 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  return text.split('\n').map((l) => l.trim().split(/\s+/).map(Number)).filter((f) => f.length === 3)
    .map(([containerId, hostId, size]) => ({ containerId: containerId!, hostId: hostId!, size: size! }));
}
