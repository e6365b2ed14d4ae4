// RestorePod: a new sandbox from the request's config, made as RunPodSandbox makes one (a new network namespace,
// every network attached again), and in it each checkpointed container, CREATED from its archive as CreateContainer
// makes a restored one (container-restore.ts): nothing runs until StartContainer, which runs `runc restore`.
//
// A checkpoint directory turns files into running processes, so the rules of container restores hold: restores
// must be on (restore.enabled), the directory must lie in restore.archive_dir, it restores only into the namespace
// it was checkpointed in, and the spec (mounts, devices, security context) is the request's. It is only read.
//
// Addresses: the default network's may change (a new sandbox on this node's pod subnet). A secondary network keeps
// its address where its definition here declares the `ips` capability (the recorded address is asked for again)
// or fixes it with static IPAM (it is checked); an address another pod of this node holds fails the restore.
//
// All or nothing: the sandbox is marked `restoring` until every container is made; a failure removes it with
// what it holds, and recovery removes one the daemon's death cut off.
import { stat } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import { DeadlineExceeded, FailedPrecondition, InvalidArgument, NotFound, PermissionDenied } from '../core/errors.js';
import { faultPoint } from '../core/faults.js';
import type { ContainerConfig__Output } from '../gen/runtime/v1/ContainerConfig.js';
import type { PodSandboxConfig__Output } from '../gen/runtime/v1/PodSandboxConfig.js';
import { readRootfsFile } from '../oci/runtime/rootfs-read.js';
import { podNamespaceModes } from '../oci/runtime/spec/index.js';
import { lateAsDeadline } from './container-checkpoint.js';
import { createContainer } from './container-create.js';
import { planArchiveRestore, realPathInArchiveDir, type RestorePlan } from './container-restore.js';
import type { PodContext } from './context.js';
import { checkNoOptions, type CallLimits } from './pod-checkpoint.js';
import {
  attachmentsOf, checkAddressesFree, firstRepeated, checkKeptAddresses, checkSameProcess, matchContainers, MAX_MANIFEST_BYTES,
  parsePodManifest, planSecondaryAddresses, POD_MANIFEST, type AddressPlan, type CheckpointedContainer, type PodCheckpointManifest,
} from './pod-checkpoint-manifest.js';
import { removeSandbox } from './sandbox-remove.js';
import { runSandbox } from './sandbox-run.js';
import { checkContainerConfig, checkPodSandboxConfig, runtimeHandlerNamed } from './validation.js';

export interface RestorePodRequest {
  checkpointPath: string;
  config: PodSandboxConfig__Output | null;
  runtimeHandler: string;
  options: Record<string, string>;
  containerConfigs: ContainerConfig__Output[];
  /** Each config's stop_signal as its CRI number (the edge decodes the enum). */
  stopSignals: number[];
}

export interface RestoredPod {
  podSandboxId: string;
  restored: { name: string; containerId: string }[];
}

type NamedConfig = ContainerConfig__Output & { metadata: NonNullable<ContainerConfig__Output['metadata']> };

/** INVALID_ARGUMENT for what is wrong with the request itself, before anything is read. Pure. */
export function checkRestorePodRequest(req: RestorePodRequest, deadline: number | undefined): NamedConfig[] {
  if (deadline === undefined) throw new InvalidArgument('RestorePod needs a deadline on the call: set a timeout');
  checkNoOptions('RestorePod', req.options);
  if (!req.checkpointPath || !isAbsolute(req.checkpointPath)) {
    throw new InvalidArgument(`checkpoint_path "${req.checkpointPath}" is not an absolute path: give the directory CheckpointPod wrote`);
  }
  if (req.containerConfigs.length === 0) {
    throw new InvalidArgument('container_configs is empty: give one config per checkpointed container');
  }
  const configs = req.containerConfigs.map((c) => { checkContainerConfig(c); return c; });
  const twice = firstRepeated(configs.map((c) => c.metadata.name));
  if (twice !== undefined) throw new InvalidArgument(`container_configs names "${twice}" twice: names match the checkpoint's, one each`);
  return configs;
}

export async function restorePod(ctx: PodContext, req: RestorePodRequest, call: CallLimits): Promise<RestoredPod> {
  const plan = await planPodRestore(ctx, req, call);
  // Planned: the sandbox (marked until the restore is done), then each container from its archive; a failure undoes all.
  const podSandboxId = await runSandbox(ctx, plan.config, plan.handler, call.log, { restoring: true });
  const log = call.log.child({ sandboxId: podSandboxId });
  try {
    const sandbox = ctx.tables.sandboxes.find(podSandboxId);
    checkKeptAddresses(plan.addresses.kept, attachmentsOf(sandbox));
    // Let through again once the last of its containers is restored (container-start.ts); a pod on the node's
    // network has no loopback of its own.
    if (plan.containers.some((c) => c.archive.tcpEstablished) && sandbox.netns) await ctx.host.holdLoopbackResets(sandbox.netns.path, true);
    faultPoint('pod-restore-sandbox-ready');
    const restored: RestoredPod['restored'] = [];
    for (const [i, { config, archive }] of plan.containers.entries()) {
      if (call.signal.aborted) throw new DeadlineExceeded('the call\'s deadline passed');
      const containerId = await createContainer(ctx, podSandboxId, config, plan.config, log, req.stopSignals[i] ?? 0, archive);
      restored.push({ name: config.metadata.name, containerId });
    }
    faultPoint('pod-restore-containers-created');
    ctx.tables.sandboxes.update(podSandboxId, (r) => { delete r.restoring; });
    log.info({ checkpoint: req.checkpointPath, containers: restored.map((r) => r.name), renewed: plan.addresses.renewed }, 'pod restored');
    return { podSandboxId, restored };
  } catch (err) {
    // All or nothing: the sandbox goes with every container made in it (a removal that fails is retried in the background).
    await removeSandbox(ctx, podSandboxId, log).catch((e: unknown) => log.error({ err: e }, 'removing the half-restored pod failed'));
    throw lateAsDeadline(err, call.signal,
      `restore of ${plan.what} did not finish before the call's deadline: nothing of it was left; give it more time`);
  }
}

/** Everything decided before anything is made: a refused restore costs nothing and leaves nothing. */
async function planPodRestore(ctx: PodContext, req: RestorePodRequest, call: CallLimits): Promise<{
  what: string; handler: string; config: PodSandboxConfig__Output; addresses: AddressPlan;
  containers: { config: NamedConfig; archive: RestorePlan }[];
}> {
  const configs = checkRestorePodRequest(req, call.deadline);
  const settings = ctx.settings.restore;
  if (!settings?.enabled) {
    throw new FailedPrecondition('restoring pods is off on this node: set restore.enabled = true in minicri\'s config to allow it');
  }
  const { config } = req;
  checkPodSandboxConfig(config);
  const handler = runtimeHandlerNamed(req.runtimeHandler, ctx.settings.default_runtime, ctx.runtimes.keys());
  const what = `checkpoint ${req.checkpointPath}`;
  const dir = await realPathInArchiveDir(req.checkpointPath, settings, what);
  if (!(await stat(dir)).isDirectory()) throw new InvalidArgument(`checkpoint_path ${req.checkpointPath} is not a directory`);
  const manifest = await readManifest(dir, req.checkpointPath);
  const { namespace } = config.metadata;
  if (manifest.pod.namespace !== namespace) {
    throw new PermissionDenied(`${what} was taken in namespace "${manifest.pod.namespace}" `
      + `(pod "${manifest.pod.name}"): it restores only into a pod of that namespace, not of "${namespace}"`);
  }
  const containers: { config: NamedConfig; archive: RestorePlan }[] = [];
  for (const { config: c, container } of matchContainers(manifest.containers, configs, what)) {
    checkSameProcess(container, c);
    const missing = () => new InvalidArgument(
      `${what} has no archive ${container.archive} for container "${container.name}": it is incomplete`);
    // Every component resolved, not only the last: containers/ could lead out of restore.archive_dir too.
    const archive = await realPathInArchiveDir(join(dir, container.archive), settings, `${what}: archive ${container.archive}`)
      .catch((err: unknown) => { throw err instanceof NotFound ? missing() : err; });
    if (!(await stat(archive)).isFile()) throw missing();
    const plan = await planArchiveRestore(ctx, archive, namespace);
    checkSameImage(ctx, c, plan, container);
    containers.push({ config: c, archive: { ...plan, tcpEstablished: manifest.tcpEstablished === true } });
  }
  const hostNetwork = podNamespaceModes(config).network === 'NODE';
  const addresses = planSecondaryAddresses(config.annotations, namespace, manifest.networks,
    hostNetwork ? [] : ctx.network.secondaryNetworks({ name: config.metadata.name, namespace, annotations: config.annotations }));
  checkAddressesFree(addresses.kept, ctx.tables.sandboxes.list().map((s) => ({
    id: s.id, pod: `${s.config.metadata.namespace}/${s.config.metadata.name}`,
    networkAttached: s.networkAttached, networkStatus: s.networkStatus,
  })));
  if (call.signal.aborted) throw new DeadlineExceeded('RestorePod: the call\'s deadline passed before the restore began');
  return { what, handler, config: { ...config, annotations: addresses.annotations }, addresses, containers };
}

/** pod.json, read as a file someone else writes: never a FIFO or device opened, never more than a manifest's size. */
async function readManifest(dir: string, named: string): Promise<PodCheckpointManifest> {
  const text = await readRootfsFile(dir, POD_MANIFEST, `checkpoint ${named}`, MAX_MANIFEST_BYTES,
    'give a directory CheckpointPod wrote');
  if (text === undefined) throw new NotFound(`checkpoint ${named} has no ${POD_MANIFEST}: it is not a finished CheckpointPod directory`);
  return parsePodManifest(text, `checkpoint ${named}`);
}

/** FAILED_PRECONDITION unless the request's image is the one the container was checkpointed from. */
function checkSameImage(ctx: PodContext, config: NamedConfig, plan: RestorePlan, container: CheckpointedContainer): void {
  const { name } = container;
  let id: string | undefined;
  try {
    id = ctx.images.resolve(config.image!.image).id;
  } catch (err) {
    if (!(err instanceof NotFound)) throw err;
  }
  if (id !== plan.image.id) {
    throw new FailedPrecondition(`container "${name}" was checkpointed from image ${container.image.name} (${plan.image.id}), `
      + `and the request names "${config.image!.image}"${id ? ` (${id})` : ', which is not on this node'}: `
      + 'give the checkpointed image, pulled by digest');
  }
}
