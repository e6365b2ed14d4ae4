// What the pod domain needs from the world below it, each as narrow as the lifecycle uses it. The daemon
// wires the real modules in (server/daemon.ts); unit tests wire fakes and drive the orchestration alone.
import type { CdiInventory } from '../cdi/registry.js';
import type { PodDeviceStatusFile } from '../cni/dra.js';
import type { PodNetworkRequest, PodNetworkStatus, SecondaryNetwork } from '../cni/manager.js';
import type { PodNetns } from '../netns/netns.js';
import type { Rootfs, RootfsOptions } from '../oci/image/snapshot.js';
import type { ImageRecord } from '../oci/image/types.js';
import type { ExecSyncResult } from '../oci/runtime/exec.js';
import type { CdiEditsToApply } from '../oci/runtime/spec/index.js';
import type { ContainerState, CreateRequest, ExitStatus } from '../oci/runtime/runc.js';
import type { CheckpointRequest } from '../oci/runtime/checkpoint.js';
import type { PodUserns, StagedMount } from '../oci/runtime/spec/index.js';
import type { Spec } from '../oci/runtime/spec/types.js';

/** The pod network, as small as ocicni's: set up, tear down, check, status, GC (and the pod CIDR kubelet gives). */
export interface PodNetwork {
  setUpPod(r: PodNetworkRequest): Promise<PodNetworkStatus>;
  tearDownPod(r: PodNetworkRequest): Promise<void>;
  checkPod(r: PodNetworkRequest): Promise<void>;
  /** Throws when the networks a pod asks for (its annotations) cannot be resolved; nothing is made. */
  checkPodNetworks(pod: Pick<PodNetworkRequest, 'name' | 'namespace' | 'annotations'>): void;
  /** The secondary networks a pod asks for and how each can keep an address (a restored pod's). */
  secondaryNetworks(pod: Pick<PodNetworkRequest, 'name' | 'namespace' | 'annotations'>): SecondaryNetwork[];
  status(): Promise<{ ready: boolean; reason: string; message: string }>;
  /** Releases every cached attachment whose sandbox is not in the list. */
  gc(validSandboxIds: string[]): Promise<void>;
  setPodCidr(cidr: string): void;
  /** The pod's DRA device status file as set-up wrote it (verbose status); undefined when it has none. */
  deviceStatus(sandboxId: string): Promise<PodDeviceStatusFile | undefined>;
}

/** One OCI runtime handler (runc under conmon) as the lifecycle drives it. */
export interface ContainerRuntime {
  create(c: CreateRequest): Promise<{ pid: number }>;
  /** Runs a checkpointed container again from CRIU's images (a restored container's start). */
  restore(c: CreateRequest & { imagePath: string; tcpEstablished?: boolean }): Promise<{ pid: number }>;
  start(id: string): Promise<void>;
  state(id: string): Promise<ContainerState | undefined>;
  stop(id: string, o: { timeoutSec: number; signal?: string | number }): Promise<void>;
  /** With the container's bundle, its cgroups go even when the runtime's own state is already gone. */
  delete(id: string, o?: { force?: boolean; bundle?: string }): Promise<void>;
  exitStatus(id: string): Promise<ExitStatus | undefined>;
  /** Knows, without a read, which containers may have an exit file; tells of each new one. */
  exits: { mayHaveExited(id: string): boolean; onExit(listener: (id: string) => void): void };
  reopenLog(id: string): Promise<void>;
  execSync(id: string, cmd: string[], o: { timeoutSec: number; maxOutputBytes?: number }): Promise<ExecSyncResult>;
  update(id: string, resources: object): Promise<void>;
  /** A CRIU dump of a running container, which keeps running; whileFrozen runs before it resumes. */
  checkpoint(id: string, r: CheckpointRequest): Promise<void>;
  /** Freezes a running container for a checkpoint of several at once (CheckpointPod); resume() thaws it. */
  pause(id: string): Promise<void>;
  /** The CRIU dump of a container pause() froze, which stays frozen. */
  dump(id: string, r: Omit<CheckpointRequest, 'whileFrozen'>): Promise<void>;
  /** Ends a dump of the container that a crash of the daemon left running (before it is thawed). */
  stopCutOffDumps(id: string): Promise<void>;
  /** Thaws a paused container (one a checkpoint cut off by a crash left frozen). */
  resume(id: string): Promise<void>;
  /** Ids of the containers the runtime holds. */
  list(): Promise<string[]>;
  attachSocketPath(id: string): string;
  /** The runtime binary and its global flags, for an interactive exec run under the PTY helper. */
  commandLine(): { path: string; args: string[] };
}

/** Images as containers use them: resolved by reference, and a root filesystem each. */
export interface PodImages {
  resolve(refOrId: string): ImageRecord;
  prepareRootfs(key: string, imageRefOrId: string, opts?: RootfsOptions): Promise<Rootfs>;
  removeRootfs(key: string): Promise<void>;
  /** Drops layers no image or root filesystem uses. */
  gc(): Promise<void>;
}

/** The files that give a pod its name and its resolver, as the node's own are or as the pod's are written. */
export interface PodNameFiles {
  hostname: string;
  resolvConf: string;
  hosts: string;
}

/** Host mechanics of a pod: its directory and files, its network namespace and its /dev/shm. */
export interface PodHost {
  /** Makes a pod's directory, root's alone. */
  makePodDir(dir: string): Promise<void>;
  /** Removes a directory and all it holds; nothing to do when it is gone. */
  removeDir(dir: string): Promise<void>;
  /** The node's hostname, /etc/resolv.conf and /etc/hosts (a file that cannot be read: empty). */
  nodeNameFiles(): Promise<PodNameFiles>;
  /** Writes a pod's hostname, resolv.conf and hosts into its directory. */
  writePodFiles(dir: string, files: PodNameFiles): Promise<void>;
  /** Writes an OCI bundle's config.json, root's alone: it holds the environment, Secret values included. */
  writeBundleSpec(bundle: string, spec: Spec): Promise<void>;
  /** Where a pod's pinned network namespace and its named link go (`hex` names the sandbox in the pin). */
  netnsPaths(podName: string, where: { dir: string; hex: string }): PodNetns;
  createNetns(podName: string, paths: PodNetns): Promise<void>;
  removeNetns(ns: { path: string; symlink?: string }): Promise<void>;
  netnsExists(path: string): Promise<boolean>;
  setNetnsSysctls(path: string, sysctls: Record<string, string>): Promise<void>;
  /** Drops (`hold`) or lets through again the resets on a pod's loopback while its containers are restored. */
  holdLoopbackResets(path: string, hold: boolean): Promise<void>;
  /** `owner`: a user-namespaced pod's root on the host, who owns the tmpfs. */
  mountShm(path: string, owner?: { uid: number; gid: number }): Promise<void>;
  unmountShm(path: string): Promise<void>;
  /** A user-namespaced pod: pins the network namespace runc made for its pause (process `pid`). */
  pinNetnsOf(pid: number, podName: string, paths: PodNetns): Promise<void>;
  /** Makes the id-mapped mounts runc reaches a user-namespaced container's root and volumes through. */
  stageUserns(entry: string, mounts: readonly StagedMount[], userns: PodUserns): Promise<void>;
  /** Unmounts and removes a staging entry (with keepRoot, all but its empty root dir); nothing to do when it is gone. */
  unstageUserns(entry: string, opts?: { keepRoot?: boolean }): Promise<void>;
}

/** The node's CDI devices: the edits requested ones bring, in order (refused when unknown or conflicting), and what is known. */
export interface PodCdi {
  resolve(names: readonly string[]): Promise<CdiEditsToApply[]>;
  inventory(): Promise<CdiInventory>;
}
