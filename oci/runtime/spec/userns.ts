// User namespaces (NamespaceOption.userns_options): the checks on the mappings kubelet sends (for the pod
// and on each of its mounts), the spec edits that put the pause in a new user namespace and its containers
// in the pause's, the plan that stages a container's root and bind mounts as id-mapped mounts runc can
// reach from inside it, and what to say when the kernel cannot id-map a source. Pure.
import path from 'node:path';
import type { PodSandboxConfig__Output } from '../../../gen/runtime/v1/PodSandboxConfig.js';
import { InvalidArgument, Unimplemented } from '../../../core/errors.js';
import { mountOf, type MountInfo } from './mountinfo.js';
import type { SpecOpt } from './opts.js';
import { linuxOf } from './opts.js';
import type { LinuxIDMapping, Spec } from './types.js';
import { versionAtLeast } from '../../../core/version.js';

/** One range: `size` ids from `containerId` inside are `hostId`... on the host. */
export interface IdRange { containerId: number; hostId: number; size: number }

/** A pod's user namespace: one contiguous range each for uids and gids, starting at container id 0. */
export interface PodUserns { uids: IdRange[]; gids: IdRange[] }

/** Ids below this are the host's own (its users and groups): kubelet never hands them to a pod. */
export const HOST_IDS = 65536;
const MAX_ID = 2 ** 32 - 1;

interface WireMapping { host_id: number; container_id: number; length: number }

const rangeText = (r: IdRange): string => `${r.containerId}:${r.hostId}:${r.size}`;

function checkRanges(kind: 'uid' | 'gid', mappings: readonly WireMapping[]): IdRange[] {
  if (mappings.length !== 1) {
    throw new InvalidArgument(`user namespace ${kind} mappings must be one contiguous range, as kubelet allocates; got ${mappings.length}`);
  }
  const m = mappings[0]!;
  const what = `user namespace ${kind} mapping ${m.container_id}:${m.host_id}:${m.length} (container:host:length)`;
  for (const [field, v] of [['host_id', m.host_id], ['container_id', m.container_id], ['length', m.length]] as const) {
    if (!Number.isInteger(v) || v < 0 || v > MAX_ID) throw new InvalidArgument(`${what}: ${field} is not a 32-bit id`);
  }
  if (m.length === 0) throw new InvalidArgument(`${what} is empty: length must be at least 1`);
  if (m.container_id !== 0) throw new InvalidArgument(`${what} must start at container id 0, so the pod has a root`);
  if (m.host_id + m.length - 1 > MAX_ID) throw new InvalidArgument(`${what} runs past the last 32-bit id`);
  return [{ containerId: m.container_id, hostId: m.host_id, size: m.length }];
}

/**
 * What of the pod's mappings reaches into the host's own ids (below 65536), or undefined. kubelet allocates
 * from 65536 up; critest's `0:1000:100000` does not. Such a pod's root owns what the host's user of that
 * id owns, so the daemon warns (or refuses, with `userns_refuse_host_id_overlap`).
 */
export function hostIdOverlap(userns: PodUserns): string | undefined {
  const low = [['uid', userns.uids], ['gid', userns.gids]] as const;
  const parts = low.flatMap(([kind, ranges]) => ranges.filter((r) => r.hostId < HOST_IDS).map((r) => `${kind} mapping ${rangeText(r)}`));
  if (!parts.length) return undefined;
  return `user namespace ${parts.join(' and ')} (container:host:length) overlaps the host's own ids (0-${HOST_IDS - 1})`;
}

/**
 * The pod's user namespace, or undefined when it uses the host's (mode NODE, or no userns_options from
 * an older kubelet). POD needs the mappings kubelet allocated and the pod's own network, PID and IPC
 * namespaces; CONTAINER and TARGET are not implemented (as upstream runtimes).
 */
export function podUserNamespace(config: PodSandboxConfig__Output): PodUserns | undefined {
  const ns = config.linux?.security_context?.namespace_options;
  const u = ns?.userns_options;
  if (!u || u.mode === 'NODE') return undefined;
  if (u.mode !== 'POD') {
    throw new Unimplemented(`user namespace mode ${u.mode} is not supported: use POD (hostUsers: false) or NODE`);
  }
  for (const [kind, mode] of [['network', ns.network], ['PID', ns.pid], ['IPC', ns.ipc]] as const) {
    if (mode === 'NODE') throw new InvalidArgument(`a pod in its own user namespace cannot use the host's ${kind} namespace`);
  }
  return { uids: checkRanges('uid', u.uids), gids: checkRanges('gid', u.gids) };
}

/** The CRI Mount fields the user namespace checks read (gen's Mount__Output satisfies it). */
export interface UsernsMount {
  container_path: string;
  propagation: string;
  uidMappings?: readonly WireMapping[];
  gidMappings?: readonly WireMapping[];
}

const wireText = (ranges: readonly WireMapping[]): string => ranges.map((m) => `${m.container_id}:${m.host_id}:${m.length}`).join(',');

/**
 * A container's mounts against its pod's user namespace (undefined: the host's), before anything is made.
 * kubelet (UserNamespacesSupport) sets the pod's mappings on every mount of a user-namespaced pod, image volumes
 * included: each must be both uid and gid mappings, and the pod's own, since minicri id-maps every volume
 * of such a pod with the pod's mappings (and only those); a mount without them is id-mapped all the same.
 * A pod in the host's user namespace has no mapping to give. A pod in its own gets private id-mapped copies
 * of its bind sources: no propagation.
 */
export function checkUsernsMounts(mounts: readonly UsernsMount[], userns: PodUserns | undefined): void {
  for (const m of mounts) {
    const uids = m.uidMappings ?? [];
    const gids = m.gidMappings ?? [];
    const where = `mount "${m.container_path}"`;
    if (uids.length > 0 || gids.length > 0) {
      if (!userns) {
        throw new InvalidArgument(`${where} asks for an id-mapped mount, which only a pod in its own user namespace (hostUsers: false) `
          + 'can have: remove uidMappings and gidMappings, or run the pod with its own user namespace');
      }
      if (uids.length === 0 || gids.length === 0) {
        const [has, lacks] = uids.length ? ['uid', 'gid'] : ['gid', 'uid'];
        throw new InvalidArgument(`${where} has ${has} mappings but no ${lacks} mappings: an id-mapped mount needs both, the pod's own`);
      }
      for (const [kind, asked, pod] of [['uid', uids, userns.uids], ['gid', gids, userns.gids]] as const) {
        if (wireText(asked) !== pod.map(rangeText).join(',')) {
          throw new InvalidArgument(`${where} asks for ${kind} mapping ${wireText(asked)}, not its pod's ${pod.map(rangeText).join(',')} `
            + "(container:host:length): a volume is id-mapped with the pod's user namespace mappings, as kubelet sends them");
        }
      }
    }
    if (userns && m.propagation && m.propagation !== 'PROPAGATION_PRIVATE') {
      throw new InvalidArgument(
        `${where} asks for propagation ${m.propagation}, which a pod in its own user namespace cannot have: use private propagation`);
    }
  }
}

/** The host ids the pod's root (container uid and gid 0) has. */
export function podRootOnHost(userns: PodUserns): { uid: number; gid: number } {
  return { uid: userns.uids[0]!.hostId, gid: userns.gids[0]!.hostId };
}

const ociMappings = (ranges: readonly IdRange[]): LinuxIDMapping[] =>
  ranges.map((r) => ({ containerID: r.containerId, hostID: r.hostId, size: r.size }));

/**
 * The user namespace and its mappings: a new one for the pause (`path` absent), the pause's for a
 * container. runc wants the mappings also when joining. A network namespace without a path is made by
 * runc inside the new user namespace, so the pod's root owns it (sysfs can only be mounted then).
 */
export function withUserNamespace(userns: PodUserns | undefined, nsPath?: string): SpecOpt {
  return (spec) => {
    if (!userns) return;
    const linux = linuxOf(spec);
    const user = nsPath ? { type: 'user' as const, path: nsPath } : { type: 'user' as const };
    linux.namespaces = [...(linux.namespaces ?? []).filter((n) => n.type !== 'user'), user];
    linux.uidMappings = ociMappings(userns.uids);
    linux.gidMappings = ociMappings(userns.gids);
  };
}

/** One mount the edge makes before `runc create`: `source` seen at `target` with the pod's ids. */
export interface StagedMount {
  source: string;
  target: string;
  /** Where the container sees it (absent for the root): for messages. */
  destination?: string;
  /**
   * 'bind' as it is: the root filesystem and image volumes when they are overlays of id-mapped layers (an
   * overlay cannot be id-mapped itself), and the pod's shm (a tmpfs owned by the pod's root already).
   */
  kind: 'bind' | 'idmap';
}

/**
 * Rewrites `spec` so that runc, working as the pod's root, reaches the container's root and bind mount
 * sources under `entry` (the container's staging dir), each an id-mapped mount of the original: the root
 * at `<entry>/rootfs`, bind sources at `<entry>/m<n>`. `rootfsIdmapped` says whether the root is an overlay
 * of id-mapped layers (bound as it is) or a plain directory (id-mapped here); `plainSources` (image volumes,
 * the pod's shm) are bound as they are. Returns what to mount.
 * Bind mounts with propagation are refused: a private id-mapped copy would propagate nothing.
 */
export function stageUsernsMounts(
  spec: Spec, entry: string, rootfsIdmapped: boolean, plainSources: ReadonlySet<string> = new Set(),
): StagedMount[] {
  const staged: StagedMount[] = [];
  if (spec.root) {
    const target = path.posix.join(entry, 'rootfs');
    staged.push({ source: spec.root.path, target, kind: rootfsIdmapped ? 'bind' : 'idmap' });
    spec.root = { ...spec.root, path: target };
  }
  let n = 0;
  spec.mounts = (spec.mounts ?? []).map((m) => {
    if (m.type !== 'bind' || !m.source) return m;
    if ((m.options ?? []).some((o) => ['rshared', 'shared', 'rslave', 'slave'].includes(o))) {
      throw new InvalidArgument(
        `mount "${m.destination}" asks for mount propagation, which a pod in its own user namespace cannot have: use private propagation`);
    }
    const target = path.posix.join(entry, `m${n++}`);
    staged.push({ source: m.source, target, destination: m.destination, kind: plainSources.has(m.source) ? 'bind' : 'idmap' });
    return { ...m, source: target };
  });
  return staged;
}

/** tmpfs allows id-mapped mounts from this Linux release on. */
const TMPFS_IDMAP = '6.3';

/**
 * Why this kernel cannot id-map a staged mount's source, when it is a reason minicri can name, else
 * undefined: before Linux 6.3, tmpfs (Secrets, ConfigMaps and service-account tokens kubelet writes,
 * emptyDir with medium Memory) cannot be id-mapped, whether the source is on tmpfs or a tmpfs is mounted
 * below it (the id-mapped copy takes the submounts too). `mounts` is the host's mountinfo, parsed.
 */
export function idmapKernelProblem(
  m: Pick<StagedMount, 'source' | 'destination'>, mounts: readonly MountInfo[], kernelRelease: string,
): string | undefined {
  if (versionAtLeast(kernelRelease, TMPFS_IDMAP)) return undefined;
  const below = mounts.find((x) => x.fsType === 'tmpfs' && x.mountPoint.startsWith(`${m.source.replace(/\/+$/, '')}/`));
  const what = mountOf(m.source, mounts)?.fsType === 'tmpfs' ? 'the source is on tmpfs'
    : below ? `a tmpfs is mounted below the source at "${below.mountPoint}"` : undefined;
  if (!what) return undefined;
  const where = m.destination ? `mount "${m.destination}" (host path "${m.source}")` : `mount "${m.source}"`;
  return `${where}: id-mapped mounts of tmpfs need Linux ${TMPFS_IDMAP} or newer (this node runs ${kernelRelease}) and ${what}; `
    + 'a pod in its own user namespace (hostUsers: false) gets each volume id-mapped: '
    + `run it with hostUsers: true, or the node on Linux ${TMPFS_IDMAP} or newer`;
}
