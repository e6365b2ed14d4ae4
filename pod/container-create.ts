// CreateContainer: root filesystem, OCI spec, then `runc create` under conmon, leaving it CREATED.
import { randomBytes } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { requestedCdiDevices } from '../cdi/spec.js';
import { FailedPrecondition, InvalidArgument } from '../core/errors.js';
import { faultPoint } from '../core/faults.js';
import type { Logger } from '../core/log.js';
import { nowNanos } from '../core/time.js';
import { Timeline } from '../core/timeline.js';
import { withUndo } from '../core/undo.js';
import type { ContainerConfig__Output } from '../gen/runtime/v1/ContainerConfig.js';
import type { PodSandboxConfig__Output } from '../gen/runtime/v1/PodSandboxConfig.js';
import { resolveMountSources } from '../oci/runtime/mount-sources.js';
import { buildContainerSpec, checkUsernsMounts, containerLogPath, imageVolumesToCreate, podUserNamespace, stageUsernsMounts } from '../oci/runtime/spec/index.js';
import { usernsStagingEntry } from '../oci/runtime/userns.js';
import { containerNow } from './container-refresh.js';
import type { PodContext } from './context.js';
import { specImageConfig } from './image-config.js';
import { imageVolumeUses, mountImageVolumes, releaseImageVolumes } from './image-volumes.js';
import type { ContainerRecord } from './records.js';
import { sandboxNow } from './sandbox-refresh.js';
import { readSeccompProfiles } from './seccomp-profile.js';
import { markContainerCreated } from './state.js';
import { stopSignalInForce } from './stop-signal.js';
import { checkContainerConfig } from './validation.js';

/**
 * Creates a container in the sandbox with that id or unique prefix; returns its id. `stopSignal` is the config's
 * stop_signal as its CRI number, which the edge decodes (the enum's names change between cri-api versions).
 */
export async function createContainer(
  ctx: PodContext, sandboxIdOrPrefix: string, config: ContainerConfig__Output | null, sandboxConfig: PodSandboxConfig__Output | null, log: Logger,
  stopSignal = 0,
): Promise<string> {
  checkContainerConfig(config);
  // Under the sandbox's lock: a pod being stopped or removed meanwhile would miss this container.
  const sandboxId = ctx.tables.sandboxes.find(sandboxIdOrPrefix).id;
  return ctx.locks.run(sandboxId, () => createInSandbox(ctx, sandboxId, config, sandboxConfig, log, stopSignal));
}

type CheckedConfig = ContainerRecord['config'];

async function createInSandbox(
  ctx: PodContext, sandboxId: string, config: CheckedConfig, requestSandboxConfig: PodSandboxConfig__Output | null, parentLog: Logger,
  stopSignal: number,
): Promise<string> {
  const t = new Timeline();
  const begun = performance.now();
  // Refreshed: a container must never join the namespaces of a pause that has died (its pid may be reused).
  const sandbox = await sandboxNow(ctx, sandboxId);
  if (sandbox.state !== 'SANDBOX_READY') {
    throw new FailedPrecondition(`sandbox ${sandbox.id} is not ready (state ${sandbox.state}): start a new sandbox and create the container there`);
  }
  // The pod's user namespace is the one its pause was made with, whatever the request repeats.
  const userns = podUserNamespace(sandbox.config);
  checkUsernsMounts(config.mounts, userns);
  const requested = requestSandboxConfig ?? sandbox.config;
  const sandboxConfig = userns || requested.linux?.security_context?.namespace_options?.userns_options?.mode === 'POD'
    ? { ...requested, linux: sandbox.config.linux } : requested;
  const image = await t.step('image-lookup', () => ctx.images.resolve(config.image!.image));
  const logPath = config.log_path ? containerLogPath(sandbox.config.log_directory, config.log_path) : undefined;
  if (config.log_path && !logPath) {
    throw new InvalidArgument(`log_path "${config.log_path}" must stay inside the sandbox log directory "${sandbox.config.log_directory}"`);
  }
  const runtime = ctx.runtimes.get(sandbox.runtimeHandler);
  if (!runtime) throw new FailedPrecondition(`runtime handler "${sandbox.runtimeHandler}" of sandbox ${sandbox.id} is no longer configured: add it back or start a new sandbox`);
  const seccompProfiles = await readSeccompProfiles(config.linux?.security_context ?? undefined);
  // Resolved before anything is made: an unknown or conflicting device refuses the request with nothing left.
  const cdi = await ctx.cdi.resolve(requestedCdiDevices(config.CDI_devices, config.annotations));
  const imageVolumes = imageVolumeUses(ctx, config.mounts, userns);
  const id = randomBytes(32).toString('hex');
  const log = parentLog.child({ containerId: id });
  const imageConfig = specImageConfig(image);
  const record: ContainerRecord = {
    id, sandboxId: sandbox.id, state: 'CONTAINER_CREATED', creating: true, createdAt: nowNanos(), startedAt: '0', finishedAt: '0',
    exitCode: 0, reason: '', message: '', config,
    image: { id: image.id, name: config.image!.image, ref: image.repoDigests[0] ?? image.id },
    dir: join(ctx.settings.root_dir, 'containers', id), logPath: logPath ?? '', stopSignal: stopSignalInForce(stopSignal, imageConfig.StopSignal),
    ...(imageVolumes.length ? { imageVolumes } : {}),
  };
  // Under the sandbox's lock already (so no two creations in a pod overlap); the id lock makes a
  // Stop or Remove of the container (listed as soon as its record exists) wait for the creation.
  return ctx.locks.run(id, () => withUndo(log, async (undo) => {
    ctx.tables.containers.put(record);
    undo.pushRecord('container record', () => ctx.tables.containers.delete(id));
    await mkdir(record.dir, { recursive: true, mode: 0o700 });
    undo.push('container directory', () => rm(record.dir, { recursive: true, force: true }));
    const rootfs = await t.step('rootfs', () => ctx.images.prepareRootfs(id, image.id, userns ? { idmap: userns } : {}));
    const specBegun = performance.now();
    undo.push('container rootfs', () => ctx.images.removeRootfs(id));
    record.rootfsUpper = rootfs.mount?.options.find((o) => o.startsWith('upperdir='))?.slice('upperdir='.length);
    faultPoint('container-rootfs-mounted');

    const volumeDirs: Record<string, string> = {};
    for (const volume of imageVolumesToCreate(image.config.volumes, config.mounts)) {
      volumeDirs[volume] = join(record.dir, 'volumes', volume.replaceAll('/', '_'));
      await mkdir(volumeDirs[volume], { recursive: true, mode: 0o755 });
    }
    const host = await ctx.hostFacts(rootfs.path);
    // "rro" only where this handler's runc and the kernel were found to support it.
    host.recursiveReadOnly = ctx.runtimeFeatures?.get(sandbox.runtimeHandler)?.recursiveReadOnly ?? false;
    if (seccompProfiles) host.seccompProfiles = seccompProfiles;
    const target = config.linux?.security_context?.namespace_options?.target_id;
    if (target) {
      const targetRecord = await containerNow(ctx, target);
      if (targetRecord.sandboxId !== sandbox.id || targetRecord.state !== 'CONTAINER_RUNNING') {
        throw new FailedPrecondition(`PID namespace target ${target} must be a running container of sandbox ${sandbox.id}`);
      }
      host.targetPid = targetRecord.pid;
    }
    undo.push('image volumes', () => releaseImageVolumes(ctx, record, log));
    const imageVolumeMounts = await mountImageVolumes(ctx, imageVolumes, userns);
    const sources = await resolveMountSources(config.mounts.filter((m) => !m.image?.image));
    for (const path of sources.created) ctx.tables.hostPaths.put({ id: path, containerId: id, sandboxId: sandbox.id, createdAt: Date.now() });
    const spec = buildContainerSpec({
      id, sandboxId: sandbox.id, config: { ...config, mounts: sources.mounts }, sandboxConfig, image: { name: record.image.name, config: imageConfig },
      rootfs: rootfs.path, cgroupDriver: ctx.settings.cgroup_driver, host, volumeDirs, cdi, imageVolumes: imageVolumeMounts,
      sandbox: {
        pausePid: sandbox.pausePid!, netnsPath: sandbox.netns?.path, shmPath: sandbox.shm,
        hostsPath: join(sandbox.dir, 'hosts'), resolvPath: join(sandbox.dir, 'resolv.conf'), hostnamePath: join(sandbox.dir, 'hostname'),
      },
    });
    const user = spec.process?.user;
    if (user) record.user = { uid: user.uid, gid: user.gid, additionalGids: [...(user.additionalGids ?? [])] };
    const staging = usernsStagingEntry(ctx.settings.state_dir, id);
    if (userns) {
      // runc, as the pod's root, reaches the root filesystem and every volume through id-mapped mounts it can enter;
      // image volumes (overlays of id-mapped layers) and the pod's shm (its root's tmpfs) are bound as they are.
      const plain = new Set([...imageVolumeMounts.map((v) => v.source), ...(sandbox.shm ? [sandbox.shm] : [])]);
      const staged = stageUsernsMounts(spec, staging, rootfs.idmapped ?? false, plain);
      undo.push('user namespace staging', () => ctx.host.unstageUserns(staging));
      await ctx.host.stageUserns(staging, staged, userns);
      faultPoint('container-userns-staged');
    }
    // The spec holds the environment, Secret values included: root's alone.
    await writeFile(join(record.dir, 'config.json'), JSON.stringify(spec), { mode: 0o600 });
    if (record.logPath) await mkdir(dirname(record.logPath), { recursive: true, mode: 0o755 });
    t.add({ step: 'spec', ms: performance.now() - specBegun });
    undo.push('runc container', () => runtime.delete(id, { force: true, bundle: record.dir }));
    // conmon starts and runs `runc create`; it answers with the container's pid.
    const { pid } = await t.step('runc-create', () => runtime.create({
      id, bundle: record.dir, logPath: record.logPath || '/dev/null', stdin: config.stdin, stdinOnce: config.stdin_once, tty: config.tty,
    }));
    // The container holds its own copies of the mounts now (runc still starts exec processes in the root dir).
    if (userns) await ctx.host.unstageUserns(staging, { keepRoot: true });
    faultPoint('container-created');
    markContainerCreated(record, pid);
    t.add({ step: 'total', ms: performance.now() - begun });
    record.timeline = t.entries;
    ctx.tables.containers.put(record);
    log.info({ name: config.metadata.name, image: record.image.name, ms: t.ms }, 'container created');
    return id;
  }));
}
