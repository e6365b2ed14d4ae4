// RunPodSandbox: pod directory and files, /dev/shm, network namespace, then CNI and the pause container.
// Every step that changes the host pushes its inverse, so a failure leaves nothing behind; the steps are
// in sandbox-steps.ts, and runSandbox shows what runs in parallel and what waits for what.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { FailedPrecondition, InvalidArgument } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { nowNanos } from '../core/time.js';
import { Timeline } from '../core/timeline.js';
import { inParallel, withUndo } from '../core/undo.js';
import type { PodSandboxConfig__Output } from '../gen/runtime/v1/PodSandboxConfig.js';
import { podCgroupParentDir } from '../oci/runtime/cgroups.js';
import { hostIdOverlap, HOST_IDS, podNamespaceModes, podUserNamespace, splitSysctls, type PodUserns } from '../oci/runtime/spec/index.js';
import type { PodContext } from './context.js';
import { sandboxReservation, type SandboxRecord } from './records.js';
import {
  attachNetwork, finishSandbox, makeNetns, mountPodShm, pinPauseNetns, preparePauseRoot, recordSandbox, startPause, writePodFiles,
  type SandboxBuild,
} from './sandbox-steps.js';
import { readSeccompProfiles } from './seccomp-profile.js';
import { checkPodSandboxConfig, runtimeHandlerNamed } from './validation.js';

/**
 * Makes a sandbox for `config` under `runtimeHandler` (empty: the default one); returns its id. RestorePod's
 * sandbox is marked `restoring` until the restore is done (pod-restore.ts).
 */
export async function runSandbox(
  ctx: PodContext, config: PodSandboxConfig__Output | null, runtimeHandler: string, parentLog: Logger, mark: { restoring?: true } = {},
): Promise<string> {
  const { plan, record } = await planSandbox(ctx, config, runtimeHandler, parentLog);
  Object.assign(record, mark);
  // The reservation lock orders creations of one pod name; the id lock makes a Stop or Remove of
  // the sandbox (listed as soon as its record exists) wait until the creation is done or undone.
  return ctx.locks.run(sandboxReservation(record), () => ctx.locks.run(plan.id, () => withUndo(plan.log, async (undo) => {
    const b: SandboxBuild = { ...plan, undo };
    recordSandbox(b, record);
    // shm ∥ netns ∥ pause rootfs ∥ pod files → pause; netns → network (user-namespaced: pause → netns pin → network).
    // The shm mount and the netns go first: each needs a process, and the pause waits for both. The pause only
    // needs the namespace to join, not the network in it: CNI ADD runs while the pause is created and started,
    // which takes the plugins off the critical path.
    const { t } = b;
    const shm = t.step('shm', () => mountPodShm(b));
    const netns = t.step('netns', () => makeNetns(b));
    const root = t.step('pause-rootfs', () => preparePauseRoot(b));
    const files = t.step('pod-files', () => writePodFiles(b));
    // The CNI plugins' forks wait for the pause's conmon to be started: a fork stalls the daemon several ms, and
    // the pause is the critical path. A pause that failed before that leaves the network alone.
    let launched!: (started: boolean) => void;
    const pauseLaunched = new Promise<boolean>((resolve) => { launched = resolve; });
    const paused = inParallel([shm, netns, root, files]).then(([, , made]) => startPause(b, made, () => launched(true)));
    paused.catch(() => launched(false));
    // A user-namespaced pod's network namespace exists once its pause does.
    const networked = b.userns
      ? paused.then(() => pinPauseNetns(b)).then(() => attachNetwork(b))
      : inParallel([netns, pauseLaunched]).then(([, started]) => (started ? attachNetwork(b) : undefined));
    await inParallel([networked, paused]);
    await finishSandbox(b);
    return plan.id;
  })));
}

/** Everything decided before anything is made (a bad request costs nothing), and the record to begin with. */
async function planSandbox(
  ctx: PodContext, config: PodSandboxConfig__Output | null, runtimeHandler: string, parentLog: Logger,
): Promise<{ plan: Omit<SandboxBuild, 'undo'>; record: SandboxRecord }> {
  checkPodSandboxConfig(config);
  const t = new Timeline();
  const begun = performance.now();
  const handler = runtimeHandlerNamed(runtimeHandler, ctx.settings.default_runtime, ctx.runtimes.keys());
  const modes = podNamespaceModes(config);
  const userns = podUserNamespace(config);
  if (userns) {
    checkUsernsSupport(ctx, handler);
    checkHostIdOverlap(ctx, `${config.metadata.namespace}/${config.metadata.name}`, userns, parentLog);
  }
  const hostNetwork = modes.network === 'NODE';
  const sysctls = splitSysctls(config.linux?.sysctls ?? {}, modes.ipc === 'NODE', hostNetwork);
  const cgroupParent = podCgroupParentDir(ctx.settings.cgroup_driver, config.linux?.cgroup_parent ?? '');
  const seccompProfiles = await readSeccompProfiles(config.linux?.security_context ?? undefined);
  // Secondary networks are resolved first: a bad request for them must not cost a namespace and a pause.
  const { name, namespace } = config.metadata;
  if (!hostNetwork) ctx.network.checkPodNetworks({ name, namespace, annotations: config.annotations });
  const pause = await t.step('pause-image', () => ctx.pauseImage(parentLog));
  const id = randomBytes(32).toString('hex');
  const plan = {
    ctx, id, config, log: parentLog.child({ sandboxId: id }), t, begun, runtime: ctx.runtimes.get(handler)!, pause, userns,
    hostNetwork, hostIpc: modes.ipc === 'NODE', netSysctls: sysctls.net, cgroupParent, seccompProfiles,
  };
  const record: SandboxRecord = {
    id, state: 'SANDBOX_NOTREADY', creating: true, createdAt: nowNanos(), config, runtimeHandler: handler,
    dir: join(ctx.settings.root_dir, 'sandboxes', id), networkAttached: false, ips: [], cniResults: [],
    pauseImage: { id: pause.id, name: pause.name },
  };
  return { plan, record };
}

/** A mapping onto the host's own ids (critest's, not kubelet's) runs with a warning unless the config refuses it. */
function checkHostIdOverlap(ctx: PodContext, pod: string, userns: PodUserns, log: Logger): void {
  const overlap = hostIdOverlap(userns);
  if (!overlap) return;
  if (ctx.settings.userns_refuse_host_id_overlap) {
    throw new InvalidArgument(
      `${overlap}, which this node refuses (userns_refuse_host_id_overlap = true): map the pod to ids from ${HOST_IDS} up`);
  }
  log.warn({ pod },
    `${overlap}: the pod's ids are those of the host's own users and groups (allowed: userns_refuse_host_id_overlap is false)`);
}

/** A user-namespaced pod needs a handler that supports user namespaces on this node (probed at start). */
export function checkUsernsSupport(ctx: PodContext, handler: string): void {
  const features = ctx.runtimeFeatures?.get(handler);
  if (!features?.userNamespaces) {
    const why = features ? `: ${features.missing.join('; ')}` : '';
    throw new FailedPrecondition(
      `runtime handler "${handler}" does not support user namespaces on this node${why}: run the pod with hostUsers: true`);
  }
}
