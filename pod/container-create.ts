// CreateContainer: root filesystem, OCI spec, then `runc create` under conmon, leaving it CREATED. The steps
// are in container-steps.ts; createInSandbox shows their order. An image that is the path of a checkpoint
// archive makes a container to restore (container-restore.ts): no runc create, StartContainer restores it.
import { randomBytes } from 'node:crypto';
import { isAbsolute, join } from 'node:path';
import { requestedCdiDevices } from '../cdi/spec.js';
import { FailedPrecondition, InvalidArgument } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { nowNanos } from '../core/time.js';
import { Timeline } from '../core/timeline.js';
import { withUndo } from '../core/undo.js';
import type { ContainerConfig__Output } from '../gen/runtime/v1/ContainerConfig.js';
import type { PodSandboxConfig__Output } from '../gen/runtime/v1/PodSandboxConfig.js';
import { checkUsernsMounts, containerLogPath, podUserNamespace } from '../oci/runtime/spec/index.js';
import {
  containerHostFacts, createRuncContainer, finishContainer, makeVolumeDirs, mountVolumes, prepareContainerRootfs, recordContainer,
  writeContainerSpec, type ContainerBuild,
} from './container-steps.js';
import { planRestore, unpackRestore, type RestorePlan } from './container-restore.js';
import type { PodContext } from './context.js';
import { specImageConfig } from './image-config.js';
import { imageVolumeUses } from './image-volumes.js';
import type { ContainerRecord } from './records.js';
import { sandboxNow } from './sandbox-refresh.js';
import { readSeccompProfiles } from './seccomp-profile.js';
import { stopSignalInForce } from './stop-signal.js';
import { checkContainerConfig } from './validation.js';

/**
 * Creates a container in the sandbox with that id or unique prefix; returns its id. `stopSignal` is the config's
 * stop_signal as its CRI number, which the edge decodes (the enum's names change between cri-api versions).
 */
export async function createContainer(
  ctx: PodContext, sandboxIdOrPrefix: string, config: ContainerConfig__Output | null, sandboxConfig: PodSandboxConfig__Output | null,
  log: Logger, stopSignal = 0, from?: RestorePlan,
): Promise<string> {
  checkContainerConfig(config);
  // Under the sandbox's lock: a pod being stopped or removed meanwhile would miss this container.
  const sandboxId = ctx.tables.sandboxes.find(sandboxIdOrPrefix).id;
  return ctx.locks.run(sandboxId, () => createInSandbox(ctx, sandboxId, config, sandboxConfig, log, stopSignal, from));
}

type CheckedConfig = ContainerRecord['config'];

async function createInSandbox(
  ctx: PodContext, sandboxId: string, config: CheckedConfig, requestSandboxConfig: PodSandboxConfig__Output | null, parentLog: Logger,
  stopSignal: number, from: RestorePlan | undefined,
): Promise<string> {
  const plan = await planContainer(ctx, sandboxId, config, requestSandboxConfig, parentLog, stopSignal, from);
  const { id, t } = plan;
  // Under the sandbox's lock already (so no two creations in a pod overlap); the id lock makes a
  // Stop or Remove of the container (listed as soon as its record exists) wait for the creation.
  return ctx.locks.run(id, () => withUndo(plan.log, async (undo) => {
    const b: ContainerBuild = { ...plan, undo };
    // record → rootfs → volume dirs → node facts → volumes → spec → runc create, each waiting for the one before.
    await recordContainer(b);
    const rootfs = await prepareContainerRootfs(b);
    if (b.restore) await unpackRestore(ctx, b.restore, rootfs, b.record.dir, b);
    const specBegun = performance.now();
    const volumeDirs = await makeVolumeDirs(b);
    const host = await containerHostFacts(b, rootfs);
    const volumes = await mountVolumes(b);
    const user = await writeContainerSpec(b, rootfs, host, { volumeDirs, ...volumes });
    t.add({ step: 'spec', ms: performance.now() - specBegun });
    // A restored container runs nothing until StartContainer restores it.
    const pid = b.restore ? 0 : await createRuncContainer(b);
    finishContainer(b, rootfs, pid, user);
    return id;
  }));
}

/** Everything decided before anything is made: a bad request, or a sandbox not ready, costs nothing. */
async function planContainer(
  ctx: PodContext, sandboxId: string, config: CheckedConfig, requestSandboxConfig: PodSandboxConfig__Output | null, parentLog: Logger,
  stopSignal: number, from: RestorePlan | undefined,
): Promise<Omit<ContainerBuild, 'undo'>> {
  const t = new Timeline();
  const begun = performance.now();
  // Refreshed: a container must never join the namespaces of a pause that has died (its pid may be reused).
  const sandbox = await sandboxNow(ctx, sandboxId);
  if (sandbox.state !== 'SANDBOX_READY') {
    throw new FailedPrecondition(
      `sandbox ${sandbox.id} is not ready (state ${sandbox.state}): start a new sandbox and create the container there`);
  }
  // The pod's user namespace is the one its pause was made with, whatever the request repeats.
  const userns = podUserNamespace(sandbox.config);
  checkUsernsMounts(config.mounts, userns);
  const requested = requestSandboxConfig ?? sandbox.config;
  const sandboxConfig = userns || requested.linux?.security_context?.namespace_options?.userns_options?.mode === 'POD'
    ? { ...requested, linux: sandbox.config.linux } : requested;
  // CRI-O's restore: an image that is a path names a checkpoint archive (no image reference starts with '/').
  // RestorePod gives the plan of each of its containers' archives (`from`), its config naming the base image.
  const restore = from ?? (isAbsolute(config.image!.image)
    ? await t.step('restore-archive', () => planRestore(ctx, config.image!.image, sandbox.config.metadata.namespace)) : undefined);
  if (restore && userns) {
    throw new FailedPrecondition(
      `container "${config.metadata.name}": restoring a checkpoint into a user-namespaced pod is not supported`);
  }
  const image = restore?.image ?? await t.step('image-lookup', () => ctx.images.resolve(config.image!.image));
  const logPath = config.log_path ? containerLogPath(sandbox.config.log_directory, config.log_path) : undefined;
  if (config.log_path && !logPath) {
    throw new InvalidArgument(`log_path "${config.log_path}" must stay inside the sandbox log directory "${sandbox.config.log_directory}"`);
  }
  const runtime = ctx.runtimes.get(sandbox.runtimeHandler);
  if (!runtime) {
    throw new FailedPrecondition(
      `runtime handler "${sandbox.runtimeHandler}" of sandbox ${sandbox.id} is no longer configured: add it back or start a new sandbox`);
  }
  const seccompProfiles = await readSeccompProfiles(config.linux?.security_context ?? undefined);
  // Resolved before anything is made: an unknown or conflicting device refuses the request with nothing left.
  const cdi = await ctx.cdi.resolve(requestedCdiDevices(config.CDI_devices, config.annotations));
  const imageVolumes = imageVolumeUses(ctx, config.mounts, userns);
  const id = randomBytes(32).toString('hex');
  const imageConfig = specImageConfig(image);
  const record: ContainerRecord = {
    id, sandboxId: sandbox.id, state: 'CONTAINER_CREATED', creating: true, createdAt: nowNanos(), startedAt: '0', finishedAt: '0',
    exitCode: 0, reason: '', message: '', config,
    image: { id: image.id, name: config.image!.image, ref: image.repoDigests[0] ?? image.id },
    dir: join(ctx.settings.root_dir, 'containers', id), logPath: logPath ?? '',
    stopSignal: stopSignalInForce(stopSignal, imageConfig.StopSignal),
    ...(imageVolumes.length ? { imageVolumes } : {}),
    ...(restore ? { restoring: true as const } : {}),
    ...(restore?.tcpEstablished ? { restoreTcp: true as const } : {}),
  };
  return {
    ctx, id, log: parentLog.child({ containerId: id }), t, begun, record, sandbox, sandboxConfig, image, imageConfig, userns, runtime,
    seccompProfiles, cdi, ...(restore ? { restore } : {}),
  };
}
