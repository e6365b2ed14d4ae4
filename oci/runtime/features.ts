// What each runtime handler can do on this node, probed once at start and kept: recursive read-only
// mounts (runc lists "rro" and the kernel has mount_setattr) and user namespaces (runc knows the user
// namespace, the kernel makes them and can id-map mounts of our root filesystems and volumes).
// Status and CreateContainer read the kept answer; nothing here runs again while the daemon serves.
import { constants } from 'node:fs';
import { access, readFile, stat } from 'node:fs/promises';
import { release } from 'node:os';
import type { Logger } from '../../core/log.js';
import { probeIdmap } from '../../mounter/mounter.js';
import { versionAtLeast } from '../../core/version.js';
import { run } from '../../core/spawn.js';

/** What `<runtime> features` says that we read (OCI runtime features document). */
export interface RuncFeatures {
  mountOptions: string[];
  namespaces: string[];
}

/** The kernel side, the same for every handler. */
export interface KernelFeatures {
  /** mount_setattr(2) exists (Linux 5.12): what "rro" needs. */
  mountSetattr: boolean;
  /** User namespaces can be made (max_user_namespaces > 0). */
  userNamespaces: boolean;
  /** A directory of the root dir's filesystem can be id-mapped. */
  idmapMounts: boolean;
  /** overlayfs accepts id-mapped lower layers (Linux 5.19): how a container's root gets its owners. */
  overlayIdmappedLayers: boolean;
  /** Where user-namespaced roots are staged is searchable by a container's root on its way in. */
  stagingReachable: boolean;
}

export interface HandlerFeatures {
  recursiveReadOnly: boolean;
  userNamespaces: boolean;
  /** Why a feature is off, for the log and the verbose Status. */
  missing: string[];
}

/** Parses `runc features`; anything unreadable counts as nothing supported. Pure. */
export function parseRuncFeatures(text: string): RuncFeatures {
  try {
    const doc = JSON.parse(text) as { mountOptions?: unknown; linux?: { namespaces?: unknown } };
    const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((s): s is string => typeof s === 'string') : []);
    return { mountOptions: strings(doc.mountOptions), namespaces: strings(doc.linux?.namespaces) };
  } catch {
    return { mountOptions: [], namespaces: [] };
  }
}

/** A handler's features from its runtime's answer and the kernel's. Pure. */
export function handlerFeatures(runc: RuncFeatures | undefined, kernel: KernelFeatures): HandlerFeatures {
  const missing: string[] = [];
  if (!runc) missing.push('the runtime does not answer "features"');
  else {
    if (!runc.mountOptions.includes('rro')) missing.push('the runtime does not list the "rro" mount option');
    if (!runc.namespaces.includes('user')) missing.push('the runtime does not list the user namespace');
  }
  if (!kernel.mountSetattr) missing.push('the kernel has no mount_setattr (Linux 5.12)');
  if (!kernel.userNamespaces) missing.push('user namespaces are off (user.max_user_namespaces is 0)');
  if (!kernel.idmapMounts) missing.push('the kernel cannot id-map mounts of the root dir\'s filesystem');
  if (!kernel.overlayIdmappedLayers) missing.push('overlayfs takes no id-mapped layers (Linux 5.19)');
  if (!kernel.stagingReachable) missing.push('a directory above the user namespace staging dir is not searchable by others (needs o+x)');
  const recursiveReadOnly = !!runc?.mountOptions.includes('rro') && kernel.mountSetattr;
  const userNamespaces = !!runc?.namespaces.includes('user') && kernel.mountSetattr && kernel.userNamespaces
    && kernel.idmapMounts && kernel.overlayIdmappedLayers && kernel.stagingReachable;
  return { recursiveReadOnly, userNamespaces, missing };
}

/** `<runtimePath> features`, or undefined when it cannot say (an older runc, a missing binary). */
export async function probeRuncFeatures(runtimePath: string): Promise<RuncFeatures | undefined> {
  try {
    const r = await run(runtimePath, ['features'], { signal: AbortSignal.timeout(10_000), maxOutput: 1 << 20 });
    return r.code === 0 ? parseRuncFeatures(r.stdout) : undefined;
  } catch {
    return undefined;
  }
}

/** Every ancestor of `dir` can be searched by others (a container's root is "others" to them). */
async function searchableByOthers(dir: string): Promise<boolean> {
  const parts = dir.split('/').filter(Boolean);
  for (let i = 0; i < parts.length; i++) {
    const ancestor = `/${parts.slice(0, i).join('/')}`;
    const st = await stat(ancestor).catch(() => undefined);
    if (!st || (st.mode & constants.S_IXOTH) === 0) return false;
  }
  return true;
}

/** The kernel's features; `rootDir` is where layers and volumes live, `stagingDir` where userns roots go. */
export async function probeKernelFeatures(rootDir: string, stagingDir: string, log: Logger): Promise<KernelFeatures> {
  const [idmap, maxUserns, reachable] = await Promise.all([
    access(rootDir, constants.R_OK).then(() => probeIdmap(rootDir),
      (err: Error) => ({ ok: false as const, step: 'unknown', reason: `cannot read ${rootDir}: ${err.message}` })),
    readFile('/proc/sys/user/max_user_namespaces', 'utf8').then((s) => Number(s.trim()), () => 0),
    searchableByOthers(stagingDir),
  ]);
  if (!idmap.ok) log.info({ step: idmap.step, reason: idmap.reason }, 'id-mapped mounts are not available: user namespaces are off');
  return {
    mountSetattr: idmap.ok || idmap.step !== 'mount_setattr',
    userNamespaces: maxUserns > 0,
    idmapMounts: idmap.ok,
    overlayIdmappedLayers: versionAtLeast(release(), '5.19'),
    stagingReachable: reachable,
  };
}

/** Probes each handler's runtime once; the answer is kept for the daemon's life. */
export async function probeHandlerFeatures(
  runtimes: ReadonlyMap<string, { runtimePath: string }>, kernel: KernelFeatures, log: Logger,
): Promise<Map<string, HandlerFeatures>> {
  const out = new Map<string, HandlerFeatures>();
  await Promise.all([...runtimes].map(async ([handler, r]) => {
    const features = handlerFeatures(await probeRuncFeatures(r.runtimePath), kernel);
    if (features.missing.length > 0) {
      const { missing, recursiveReadOnly, userNamespaces } = features;
      log.info({ handler, missing, recursiveReadOnly, userNamespaces }, 'runtime handler features');
    }
    out.set(handler, features);
  }));
  return out;
}
