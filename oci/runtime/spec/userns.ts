// User namespaces (NamespaceOption.userns_options): the checks on the mappings kubelet sends, the spec
// edits that put the pause in a new user namespace and its containers in the pause's, and the plan that
// stages a container's root and bind mounts as id-mapped mounts runc can reach from inside it. Pure.
import path from 'node:path';
import type { PodSandboxConfig__Output } from '../../../gen/runtime/v1/PodSandboxConfig.js';
import { InvalidArgument, Unimplemented } from '../../../core/errors.js';
import type { SpecOpt } from './opts.js';
import { linuxOf } from './opts.js';
import type { LinuxIDMapping, Spec } from './types.js';

/** One range: `size` ids from `containerId` inside are `hostId`... on the host. */
export interface IdRange { containerId: number; hostId: number; size: number }

/** A pod's user namespace: one contiguous range each for uids and gids, starting at container id 0. */
export interface PodUserns { uids: IdRange[]; gids: IdRange[] }

/** Ids below this are the host's own (its users and groups): kubelet never hands them to a pod. */
export const HOST_IDS = 65536;
const MAX_ID = 2 ** 32 - 1;

interface WireMapping { host_id: number; container_id: number; length: number }

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
  if (m.host_id < HOST_IDS) {
    throw new InvalidArgument(`${what} overlaps the host's own ids (0-${HOST_IDS - 1}): map the pod to ids from ${HOST_IDS} up`);
  }
  return [{ containerId: m.container_id, hostId: m.host_id, size: m.length }];
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

/** A pod in its own user namespace gets private id-mapped copies of its bind sources: no propagation. */
export function checkUsernsMounts(mounts: readonly { container_path: string; propagation: string }[]): void {
  for (const m of mounts) {
    if (m.propagation && m.propagation !== 'PROPAGATION_PRIVATE') {
      throw new InvalidArgument(`mount "${m.container_path}" asks for propagation ${m.propagation}, which a pod in its own user namespace cannot have: use private propagation`);
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
    linux.namespaces = [...(linux.namespaces ?? []).filter((n) => n.type !== 'user'), nsPath ? { type: 'user', path: nsPath } : { type: 'user' }];
    linux.uidMappings = ociMappings(userns.uids);
    linux.gidMappings = ociMappings(userns.gids);
  };
}

/** One mount the edge makes before `runc create`: `source` seen at `target` with the pod's ids. */
export interface StagedMount {
  source: string;
  target: string;
  /**
   * 'bind' as it is: the root filesystem (an overlay cannot be id-mapped; its layers already are) and image
   * volumes (shared overlays of an image: their files show as the overflow id inside, readable as their modes allow).
   */
  kind: 'bind' | 'idmap';
}

/**
 * Rewrites `spec` so that runc, working as the pod's root, reaches the container's root and bind mount
 * sources under `entry` (the container's staging dir), each an id-mapped mount of the original: the root
 * at `<entry>/rootfs`, bind sources at `<entry>/m<n>`. `rootfsIdmapped` says whether the root is an overlay
 * of id-mapped layers (bound as it is) or a plain directory (id-mapped here); `plainSources` (image volumes)
 * are bound as they are. Returns what to mount.
 * Bind mounts with propagation are refused: a private id-mapped copy would propagate nothing.
 */
export function stageUsernsMounts(spec: Spec, entry: string, rootfsIdmapped: boolean, plainSources: ReadonlySet<string> = new Set()): StagedMount[] {
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
      throw new InvalidArgument(`mount "${m.destination}" asks for mount propagation, which a pod in its own user namespace cannot have: use private propagation`);
    }
    const target = path.posix.join(entry, `m${n++}`);
    staged.push({ source: m.source, target, kind: plainSources.has(m.source) ? 'bind' : 'idmap' });
    return { ...m, source: target };
  });
  return staged;
}
