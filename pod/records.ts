// The typed records the daemon keeps for sandboxes and containers, and the tables holding them.
// A record changes only through its table's update, and its state only through the named transitions of state.ts.
import type { PodNetworkRequest } from '../cni/manager.js';
import type { ContainerConfig__Output } from '../gen/runtime/v1/ContainerConfig.js';
import type { PodSandboxConfig__Output } from '../gen/runtime/v1/PodSandboxConfig.js';
import type { TimelineEntry } from '../core/timeline.js';
import type { RecordTable, Store } from '../store/store.js';

export type SandboxState = 'SANDBOX_READY' | 'SANDBOX_NOTREADY';

export interface SandboxRecord {
  id: string;
  state: SandboxState;
  /** Set until RunPodSandbox finished: a sandbox found so at start was cut off mid-way and is undone. */
  creating?: boolean;
  /** Made by a RestorePod that has not answered yet: found so at start, it was cut off and is removed whole. */
  restoring?: true;
  /** Set once its removal began; a removal that failed or was cut off is finished in the background. */
  removing?: PendingRemoval;
  /** Unix time in nanoseconds, as a decimal string (CRI int64). */
  createdAt: string;
  config: PodSandboxConfig__Output & { metadata: NonNullable<PodSandboxConfig__Output['metadata']> };
  runtimeHandler: string;
  /** Persistent pod directory: the pause bundle, hostname, hosts, resolv.conf. */
  dir: string;
  /** The pod's /dev/shm tmpfs, when the pod has its own IPC namespace. */
  shm?: string;
  /** The pinned network namespace and its named link, unless the pod uses the host network. */
  netns?: { path: string; symlink: string };
  /** Whether a CNI attachment may exist (set before ADD, cleared after a successful DEL). */
  networkAttached: boolean;
  ips: string[];
  cniResults: unknown[];
  /** Every attachment but loopback as multus reports it (network-status format); absent in records before it. */
  networkStatus?: unknown[];
  pausePid?: number;
  /** The pause image the sandbox runs. */
  pauseImage: { id: string; name: string };
  /** How long each step of RunPodSandbox took (absent on records made before it was kept). */
  timeline?: TimelineEntry[];
}

/** A removal under way or to retry: how often it failed, when to try again, and why it failed. */
export interface PendingRemoval {
  attempts: number;
  nextAt: number;
  lastError: string;
}

export type ContainerState = 'CONTAINER_CREATED' | 'CONTAINER_RUNNING' | 'CONTAINER_EXITED' | 'CONTAINER_UNKNOWN';

export interface ContainerRecord {
  id: string;
  sandboxId: string;
  state: ContainerState;
  /** Set until CreateContainer finished: a container found so at start was cut off mid-way and is undone. */
  creating?: boolean;
  /** Set once its removal began; a removal that failed or was cut off is finished in the background. */
  removing?: PendingRemoval;
  createdAt: string;
  startedAt: string;
  finishedAt: string;
  exitCode: number;
  reason: string;
  message: string;
  config: ContainerConfig__Output & { metadata: NonNullable<ContainerConfig__Output['metadata']> };
  image: { id: string; name: string; ref: string };
  /** Container directory: bundle (config.json), volumes. */
  dir: string;
  logPath: string;
  /** The overlay upper directory: the container's writable layer. */
  rootfsUpper?: string;
  /** Made from a checkpoint archive and not started yet: StartContainer restores it from CRIU's images (container-restore.ts). */
  restoring?: true;
  /** Its images hold established TCP connections (a CheckpointPod's): restored with them. */
  restoreTcp?: true;
  pid?: number;
  /** The signal StopContainer sends first: the config's stop_signal, else the image's StopSignal, else SIGTERM. */
  stopSignal: string;
  /** The images it mounts as volumes (one shared view per image). */
  imageVolumes?: ImageVolumeUse[];
  /** The process identity as the spec resolved it (absent on records made before it was kept). */
  user?: { uid: number; gid: number; additionalGids: number[] };
  /** How long each step of CreateContainer and StartContainer took (absent on records made before it was kept). */
  timeline?: TimelineEntry[];
}

/**
 * A removed container whose host objects (runc state, rootfs mount, directory, image volumes) are still being
 * released: the record moves here before RemoveContainer answers, so the container is gone for every caller
 * while its cleanup, and any retry of it, finishes from this table, across restarts too.
 */
export type ContainerCleanup = ContainerRecord & { removing: PendingRemoval };

/** A container's use of an image as a volume. */
export interface ImageVolumeUse {
  /** The rootfs key of the image's shared view. */
  key: string;
  imageId: string;
  /** The image as the mount named it. */
  image: string;
  containerPath: string;
  /** Relative to the image's root; '' for the root. */
  subPath: string;
}

/** A pod network teardown (CNI DEL) that failed and is retried in the background until it succeeds. */
export interface PendingTeardown {
  /** The sandbox id. */
  id: string;
  request: PodNetworkRequest;
  attempts: number;
  lastError: string;
  /** Unix ms of the next try. */
  nextAt: number;
}

/** kubelet's own naming of a sandbox: one per name, namespace, uid and attempt. */
export function sandboxReservation(r: SandboxRecord): string {
  const m = r.config.metadata;
  return `${m.name}_${m.namespace}_${m.uid}_${m.attempt}`;
}

/** One container per sandbox, name and attempt. */
export function containerReservation(r: ContainerRecord): string {
  const m = r.config.metadata;
  return `${r.sandboxId}_${m.name}_${m.attempt}`;
}

/** A directory (below each cgroup hierarchy's root) where this daemon put pod cgroups: orphans are looked for there. */
export interface CgroupParent {
  id: string;
}

/**
 * A host directory minicri made because a mount's source did not exist. It stays after the container (as
 * containerd and CRI-O leave it), and this record says it was ours, not the node's.
 */
export interface CreatedHostPath {
  /** The directory. */
  id: string;
  containerId: string;
  sandboxId: string;
  /** Unix ms. */
  createdAt: number;
}

/** The directories a CheckpointPod made its own (its output directory, containers/ in it), by dev and ino. */
export interface OutputIdentity {
  dev: number;
  ino: number;
  containers: { dev: number; ino: number };
}

/**
 * A CheckpointPod under way, written before its containers are frozen: one found at start was cut off, so
 * its containers are thawed and what it wrote in the output directory goes.
 */
export interface PodCheckpointIntent {
  id: string;
  sandboxId: string;
  containerIds: string[];
  outputPath: string;
  /** The output directory and the containers/ the call made in it: recovery removes only from these. */
  output: OutputIdentity;
  /** Set before pod.json is written: recovery removes it then (not one someone else put there before). */
  manifest?: boolean;
  /** The call ended, its output removed, but these containers (containerIds) could not be thawed: retried. */
  thawOnly?: boolean;
}

export interface Tables {
  sandboxes: RecordTable<SandboxRecord>;
  containers: RecordTable<ContainerRecord>;
  /** Removed containers whose host objects are still being released. */
  containerCleanups: RecordTable<ContainerCleanup>;
  /** Pod network teardowns that failed and are being retried. */
  teardowns: RecordTable<PendingTeardown>;
  cgroupParents: RecordTable<CgroupParent>;
  hostPaths: RecordTable<CreatedHostPath>;
  podCheckpoints: RecordTable<PodCheckpointIntent>;
}

export function openTables(store: Store): Tables {
  return {
    sandboxes: store.table<SandboxRecord>('sandbox', sandboxReservation),
    containers: store.table<ContainerRecord>('container', containerReservation),
    containerCleanups: store.table<ContainerCleanup>('container-cleanup'),
    teardowns: store.table<PendingTeardown>('teardown'),
    cgroupParents: store.table<CgroupParent>('cgroup-parent'),
    hostPaths: store.table<CreatedHostPath>('host-path'),
    podCheckpoints: store.table<PodCheckpointIntent>('pod-checkpoint'),
  };
}
