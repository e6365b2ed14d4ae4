// Pod network namespaces, pinned as nsfs bind mounts so they outlive any process in them.
// The mount helper pins them as `ip netns add` does, which also turns the directory into a shared
// mount point, so the pin propagates to mount namespaces created later (runc, conmon).
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { AlreadyExists, FailedPrecondition, Internal, InvalidArgument, NotFound } from '../core/errors.js';
import { normalizeSysctls, sysctlNamespace } from '../core/sysctl.js';
import { run } from '../core/spawn.js';
import { mount, MS, pinNetns, unmountIfMounted } from '../mounter/mounter.js';
import { netnsPinName, netnsSymlinkName, NETNS_PREFIX } from './names.js';

/** iproute2's fixed directory for named network namespaces. */
export const DEFAULT_NETNS_DIR = '/var/run/netns';
/** statfs(2) magic of the nsfs filesystem: a path with it is a live namespace pin. */
const NSFS_MAGIC = 0x6e736673;

export interface PodNetns {
  /** The pinned nsfs file, `<dir>/minicri-<hex>`: what CNI_NETNS and the OCI spec get. */
  path: string;
  /** `<dir>/<pod name>-<hex>`: a readable name for operators, pointing at `path`. */
  symlink: string;
}

/**
 * The paths a pod's namespace will have. Chosen before anything is made, so a caller can record
 * them first and a crash between creation and that record leaves nothing unexplained.
 */
export function podNetnsPaths(podName: string, opts: { dir?: string; hex?: string } = {}): PodNetns {
  const dir = path.resolve(opts.dir ?? DEFAULT_NETNS_DIR);
  const hex = opts.hex ?? randomBytes(8).toString('hex');
  return { path: path.join(dir, netnsPinName(hex)), symlink: path.join(dir, netnsSymlinkName(podName, hex)) };
}

/** The id prefix a pin's name carries (see podNetnsPaths), for pins no record explains. */
export function netnsOwnerPrefix(pinned: string): string {
  return path.basename(pinned).slice(NETNS_PREFIX.length);
}

/** Creates the pinned namespace and its link, at `paths` (from podNetnsPaths) or at fresh ones. */
export async function createPodNetns(podName: string, opts: { dir?: string; paths?: PodNetns } = {}): Promise<PodNetns> {
  const { path: pinned, symlink } = opts.paths ?? podNetnsPaths(podName, opts);
  const dir = path.dirname(pinned);
  await pinNewNetns(dir, pinned);
  try {
    await fs.symlink(pinned, symlink);
  } catch (err) {
    await removePodNetns({ path: pinned });
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
      throw new AlreadyExists(`netns symlink ${symlink} already exists: remove it or retry`, { cause: err });
    }
    throw new Internal(`cannot create netns symlink ${symlink}: ${(err as Error).message}`, { cause: err });
  }
  return { path: pinned, symlink };
}

/**
 * Pins the network namespace process `pid` is in at `paths` (from podNetnsPaths), with its link: a pod in
 * its own user namespace has runc make its network namespace, so that the pod's root owns it.
 */
export async function pinProcessNetns(pid: number, podName: string, paths: PodNetns): Promise<void> {
  const dir = path.dirname(paths.path);
  try {
    await fs.mkdir(dir, { recursive: true, mode: 0o755 });
    // O_EXCL: a name is never reused.
    await fs.writeFile(paths.path, '', { flag: 'wx', mode: 0o444 });
    await mount({ source: `/proc/${pid}/ns/net`, target: paths.path, flags: MS.BIND });
  } catch (err) {
    await removePodNetns({ path: paths.path }).catch(() => undefined);
    throw new Internal(`cannot pin the network namespace of process ${pid} at ${paths.path}: ${errText(err)}`, { cause: err });
  }
  try {
    await fs.symlink(paths.path, paths.symlink);
  } catch (err) {
    await removePodNetns({ path: paths.path });
    throw new Internal(`cannot create netns symlink ${paths.symlink} for pod ${podName}: ${(err as Error).message}`, { cause: err });
  }
}

async function pinNewNetns(dir: string, pinned: string): Promise<void> {
  try {
    await fs.mkdir(dir, { recursive: true, mode: 0o755 });
    await pinNetns(dir, pinned);
  } catch (err) {
    throw new Internal(`cannot create network namespace ${pinned}: ${errText(err)}`, { cause: err });
  }
}

/** Unpins the namespace and deletes the symlink; either being gone already is fine. */
export async function removePodNetns(ns: { path: string; symlink?: string }): Promise<void> {
  if (ns.symlink) {
    // Only ever delete a symlink here, never whatever a recycled name now holds.
    const st = await fs.lstat(ns.symlink).catch(() => undefined);
    if (st?.isSymbolicLink()) await fs.rm(ns.symlink, { force: true });
  }
  try {
    // A pin can be stacked (mounted twice): unmount until none is left. Lazy, as iproute2 does:
    // processes still inside keep the namespace until they exit.
    for (let i = 0; i < 8; i++) if (!(await unmountIfMounted(ns.path, { lazy: true }))) break;
  } catch (err) {
    throw new Internal(`cannot unmount network namespace ${ns.path}: ${errText(err)}`, { cause: err });
  }
  try {
    await fs.rm(ns.path, { force: true });
  } catch (err) {
    throw new Internal(`cannot delete network namespace file ${ns.path}: ${errText(err)}`, { cause: err });
  }
}

/** True when `nsPath` is a live namespace pin (an nsfs mount), not just a leftover file. */
export async function netnsExists(nsPath: string): Promise<boolean> {
  try {
    return (await fs.statfs(nsPath)).type === NSFS_MAGIC;
  } catch {
    return false;
  }
}

/** Pinned namespaces created by minicri in `dir` (full paths), for recovery after a restart. */
export async function listPodNetns(dir: string = DEFAULT_NETNS_DIR): Promise<string[]> {
  let entries;
  try {
    entries = await fs.readdir(dir, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw new Internal(`cannot list network namespaces in ${dir}: ${errText(err)}`, { cause: err });
  }
  return entries
    .filter((e) => e.name.startsWith(NETNS_PREFIX) && !e.isSymbolicLink())
    .map((e) => path.join(dir, e.name))
    .sort();
}

/** Sets `net.*` sysctls inside the namespace pinned at `nsPath` (one sysctl run for all of them). */
export async function setNetnsSysctls(nsPath: string, sysctls: Record<string, string>): Promise<void> {
  const entries = Object.entries(normalizeSysctls(sysctls));
  const other = entries.find(([name]) => sysctlNamespace(name) !== 'net');
  if (other) {
    throw new InvalidArgument(`sysctl "${other[0]}" cannot be set in a pod network namespace: only net.* names are namespaced there`);
  }
  if (entries.length === 0) return;
  if (!(await netnsExists(nsPath))) throw new NotFound(`network namespace ${nsPath} does not exist: recreate the sandbox`);
  const result = await run('nsenter', [`--net=${nsPath}`, '--', 'sysctl', '-q', '-w', ...entries.map(([k, v]) => `${k}=${v}`)]);
  if (result.code === 0) return;
  const stderr = String(result.stderr).trim();
  if (/cannot stat|No such file/i.test(stderr)) {
    throw new InvalidArgument(`unknown sysctl for pod network namespace ${nsPath}: ${stderr}: remove it from the pod's sysctls`);
  }
  // sysctl names each key the kernel refused: a value the caller gave, not a failure of ours.
  const refused = [...stderr.matchAll(/setting key "([^"]+)"(?:: (.+))?/g)];
  if (refused.length > 0) {
    const which = refused.map(([, key, why]) => {
      const given = entries.find(([k]) => k === key)?.[1] ?? '';
      return `${key}=${JSON.stringify(given)}${why ? ` (${why.trim()})` : ''}`;
    });
    throw new InvalidArgument(`the kernel refused the pod's sysctl value ${which.join(', ')}: give a value the kernel accepts for it`);
  }
  throw new Internal(`cannot set sysctls in network namespace ${nsPath}: ${stderr || `status ${result.code ?? result.signal}`}`);
}

function errText(err: unknown): string {
  const e = err as { stderr?: unknown; message?: string };
  const stderr = typeof e.stderr === 'string' ? e.stderr.trim() : '';
  return stderr || e.message || String(err);
}

/**
 * Makes `ifName` the pod's default route for each gateway's family (multus's `default-route`): the
 * family's other default routes go, one via the gateway comes.
 */
export async function setDefaultRoutes(nsPath: string, ifName: string, gateways: string[]): Promise<void> {
  const batch = gateways.flatMap((gw) => [
    `route flush exact ${gw.includes(':') ? '::/0' : '0.0.0.0/0'}`,
    `route add default via ${gw} dev ${ifName}`,
  ]);
  const out = await run('nsenter', [`--net=${nsPath}`, '--', 'ip', '-batch', '-'], { input: `${batch.join('\n')}\n` });
  if (out.code !== 0) {
    const why = out.stderr.trim() || `status ${out.code ?? out.signal}`;
    throw new InvalidArgument(`cannot make ${ifName} the default route via ${gateways.join(', ')} in ${nsPath}: ${why}`);
  }
}

// The pod's containers are restored one by one: the first end of a connection between them sends a probe as CRIU
// hands its socket back, and the kernel answers it with a reset while the peer is not restored yet. Resets on the
// pod's loopback are dropped while its containers restore, so that probe goes unanswered until the peer is back.
const LOOPBACK_RESETS = ['OUTPUT', '-o', 'lo', '-p', 'tcp', '--tcp-flags', 'RST', 'RST', '-j', 'DROP'];

/** Drops (`hold`) or lets through again the resets on the loopback of the namespace at `nsPath`. */
export async function holdLoopbackResets(nsPath: string, hold: boolean): Promise<void> {
  for (const tool of ['iptables', 'ip6tables']) {
    const r = await run('nsenter', [`--net=${nsPath}`, '--', tool, '-w', hold ? '-I' : '-D', ...LOOPBACK_RESETS])
      .catch((err: Error) => ({ code: null, stderr: err.message }));
    if (r.code !== 0 && hold) {
      throw new FailedPrecondition(`cannot hold the loopback resets of ${nsPath} for a restore of TCP connections (${tool}: `
        + `${r.stderr.trim()}): install ${tool} on the node`);
    }
  }
}
