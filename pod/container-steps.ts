// The steps of CreateContainer, each over one build context: every step that changes the host pushes its
// inverse on the build's undo stack, and the record changes only through the table (put, then one update).
// container-create.ts shows the order they run in.
import { mkdir, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { FailedPrecondition } from '../core/errors.js';
import { faultPoint } from '../core/faults.js';
import type { Logger } from '../core/log.js';
import type { Timeline } from '../core/timeline.js';
import type { UndoStack } from '../core/undo.js';
import type { Mount__Output } from '../gen/runtime/v1/Mount.js';
import type { PodSandboxConfig__Output } from '../gen/runtime/v1/PodSandboxConfig.js';
import type { Rootfs } from '../oci/image/snapshot.js';
import type { ImageRecord } from '../oci/image/types.js';
import { resolveMountSources } from '../oci/runtime/mount-sources.js';
import {
  buildContainerSpec, imageVolumesToCreate, stageUsernsMounts,
  type CdiEditsToApply, type HostFacts, type ImageConfig, type ImageVolumeMount, type PodUserns,
} from '../oci/runtime/spec/index.js';
import { usernsStagingEntry } from '../oci/runtime/userns.js';
import { containerNow } from './container-refresh.js';
import type { PodContext } from './context.js';
import { mountImageVolumes, releaseImageVolumes } from './image-volumes.js';
import type { RestorePlan } from './container-restore.js';
import type { ContainerRuntime } from './interfaces.js';
import type { ContainerRecord, SandboxRecord } from './records.js';
import { markContainerCreated } from './state.js';

/** What every step of one container's creation reads, all decided before anything is made. */
export interface ContainerBuild {
  ctx: PodContext;
  id: string;
  log: Logger;
  t: Timeline;
  /** When the creation began (performance.now()), for the timeline's total. */
  begun: number;
  undo: UndoStack;
  /** The record as it is first written; later changes go through the table. */
  record: ContainerRecord;
  sandbox: SandboxRecord;
  /** The pod's config the spec is built with (the request's, or the sandbox's own where that decides). */
  sandboxConfig: PodSandboxConfig__Output;
  image: ImageRecord;
  imageConfig: ImageConfig;
  userns: PodUserns | undefined;
  runtime: ContainerRuntime;
  seccompProfiles: Record<string, string> | undefined;
  cdi: CdiEditsToApply[];
  /** Set when the image field named a checkpoint archive: the container is restored from it (container-restore.ts). */
  restore?: RestorePlan;
}

/** The mounts the spec gets besides the config's: image volumes, and the config's own with their sources made. */
export interface ContainerVolumes {
  volumeDirs: Record<string, string>;
  imageVolumes: ImageVolumeMount[];
  mounts: Mount__Output[];
}

/** The record goes first: it reserves the name and tells recovery what may exist. Then the container's directory. */
export async function recordContainer(b: ContainerBuild): Promise<void> {
  const { tables } = b.ctx;
  const { id, dir } = b.record;
  tables.containers.put(b.record);
  b.undo.pushRecord('container record', () => tables.containers.delete(id));
  await mkdir(dir, { recursive: true, mode: 0o700 });
  b.undo.push('container directory', () => rm(dir, { recursive: true, force: true }));
}

/** The container's root filesystem. */
export async function prepareContainerRootfs(b: ContainerBuild): Promise<Rootfs> {
  const { images } = b.ctx;
  const rootfs = await b.t.step('rootfs', () => images.prepareRootfs(b.id, b.image.id, b.userns ? { idmap: b.userns } : {}));
  b.undo.push('container rootfs', () => images.removeRootfs(b.id));
  faultPoint('container-rootfs-mounted');
  return rootfs;
}

/** The overlay upper directory of a root filesystem: the container's writable layer. */
const upperDir = (rootfs: Rootfs) => rootfs.mount?.options.find((o) => o.startsWith('upperdir='))?.slice('upperdir='.length);

/** A directory for each of the image's volumes no mount covers. */
export async function makeVolumeDirs(b: ContainerBuild): Promise<Record<string, string>> {
  const volumeDirs: Record<string, string> = {};
  for (const volume of imageVolumesToCreate(b.image.config.volumes, b.record.config.mounts)) {
    volumeDirs[volume] = join(b.record.dir, 'volumes', volume.replaceAll('/', '_'));
    await mkdir(volumeDirs[volume], { recursive: true, mode: 0o755 });
  }
  return volumeDirs;
}

/** What the spec needs to know of the node, the handler and the container whose PID namespace it may join. */
export async function containerHostFacts(b: ContainerBuild, rootfs: Rootfs): Promise<HostFacts> {
  const { ctx, sandbox } = b;
  const host = await ctx.hostFacts(rootfs.path, b.record.image.name);
  // "rro" only where this handler's runc and the kernel were found to support it.
  host.recursiveReadOnly = ctx.runtimeFeatures?.get(sandbox.runtimeHandler)?.recursiveReadOnly ?? false;
  if (b.seccompProfiles) host.seccompProfiles = b.seccompProfiles;
  const target = b.record.config.linux?.security_context?.namespace_options?.target_id;
  if (target) {
    const targetRecord = await containerNow(ctx, target);
    if (targetRecord.sandboxId !== sandbox.id || targetRecord.state !== 'CONTAINER_RUNNING') {
      throw new FailedPrecondition(`PID namespace target ${target} must be a running container of sandbox ${sandbox.id}`);
    }
    host.targetPid = targetRecord.pid;
  }
  return host;
}

/** Image volumes mounted, and the config's host paths resolved (a missing source is made, and remembered). */
export async function mountVolumes(b: ContainerBuild): Promise<Omit<ContainerVolumes, 'volumeDirs'>> {
  const { ctx, record } = b;
  b.undo.push('image volumes', () => releaseImageVolumes(ctx, record, b.log));
  const imageVolumes = await mountImageVolumes(ctx, record.imageVolumes ?? [], b.userns);
  const sources = await resolveMountSources(record.config.mounts.filter((m) => !m.image?.image));
  for (const path of sources.created) {
    ctx.tables.hostPaths.put({ id: path, containerId: b.id, sandboxId: b.sandbox.id, createdAt: Date.now() });
  }
  return { imageVolumes, mounts: sources.mounts };
}

/** The OCI spec, in the bundle; returns the process identity it resolved. */
export async function writeContainerSpec(
  b: ContainerBuild, rootfs: Rootfs, host: HostFacts, v: ContainerVolumes,
): Promise<ContainerRecord['user']> {
  const { ctx, id, record, sandbox, userns } = b;
  const spec = buildContainerSpec({
    id, sandboxId: sandbox.id, config: { ...record.config, mounts: v.mounts }, sandboxConfig: b.sandboxConfig,
    image: { name: record.image.name, config: b.imageConfig }, rootfs: rootfs.path, cgroupDriver: ctx.settings.cgroup_driver, host,
    volumeDirs: v.volumeDirs, cdi: b.cdi, imageVolumes: v.imageVolumes,
    sandbox: {
      pausePid: sandbox.pausePid!, netnsPath: sandbox.netns?.path, shmPath: sandbox.shm,
      hostsPath: join(sandbox.dir, 'hosts'), resolvPath: join(sandbox.dir, 'resolv.conf'), hostnamePath: join(sandbox.dir, 'hostname'),
    },
  });
  const user = spec.process?.user;
  if (userns) {
    // runc, as the pod's root, reaches the root filesystem and every volume through id-mapped mounts it can enter;
    // image volumes (overlays of id-mapped layers) and the pod's shm (its root's tmpfs) are bound as they are.
    const staging = usernsStagingEntry(ctx.settings.state_dir, id);
    const plain = new Set([...v.imageVolumes.map((m) => m.source), ...(sandbox.shm ? [sandbox.shm] : [])]);
    const staged = stageUsernsMounts(spec, staging, rootfs.idmapped ?? false, plain);
    b.undo.push('user namespace staging', () => ctx.host.unstageUserns(staging));
    await ctx.host.stageUserns(staging, staged, userns);
    faultPoint('container-userns-staged');
  }
  await ctx.host.writeBundleSpec(record.dir, spec);
  if (record.logPath) await mkdir(dirname(record.logPath), { recursive: true, mode: 0o755 });
  return user && { uid: user.uid, gid: user.gid, additionalGids: [...(user.additionalGids ?? [])] };
}

/** conmon starts and runs `runc create`; it answers with the container's pid. */
export async function createRuncContainer(b: ContainerBuild): Promise<number> {
  const { ctx, id, record, runtime } = b;
  const { config } = record;
  b.undo.push('runc container', () => runtime.delete(id, { force: true, bundle: record.dir }));
  const { pid } = await b.t.step('runc-create', () => runtime.create({
    id, bundle: record.dir, logPath: record.logPath || '/dev/null', stdin: config.stdin, stdinOnce: config.stdin_once, tty: config.tty,
  }));
  // The container holds its own copies of the mounts now (runc still starts exec processes in the root dir).
  if (b.userns) await ctx.host.unstageUserns(usernsStagingEntry(ctx.settings.state_dir, id), { keepRoot: true });
  faultPoint('container-created');
  return pid;
}

/** runc holds the container: the record says CREATED for good, with what creation learnt and its timeline. */
export function finishContainer(b: ContainerBuild, rootfs: Rootfs, pid: number, user: ContainerRecord['user']): void {
  const rootfsUpper = upperDir(rootfs);
  b.t.add({ step: 'total', ms: performance.now() - b.begun });
  const done = b.ctx.tables.containers.update(b.id, (r) => ({
    ...markContainerCreated(r, pid), ...(rootfsUpper !== undefined ? { rootfsUpper } : {}), ...(user ? { user } : {}),
    timeline: b.t.entries,
  }));
  b.log.info({ name: done.config.metadata.name, image: done.image.name, ms: b.t.ms }, 'container created');
}
