// CheckpointPod: one consistent cut of chosen running containers of a running pod. Every container is frozen
// (the cgroup freezer, through `runc pause`) before any is dumped and stays frozen until all are, so what one
// container wrote to another (a shared volume, a pipe, a socket) is in neither or in both; then all are thawed,
// whatever happened, and keep running. Each container's checkpoint is the archive CheckpointContainer writes
// (container-checkpoint.ts), assembled in a work dir of its own; pod.json goes last (pod-checkpoint-manifest.ts).
//
// The output directory is the caller's: only pod.json and containers/ are ever written there, through the
// directory held open, and only what the call made is removed on a failure (pod-checkpoint-output.ts). An intent
// record, written before the first freeze, lets recovery finish the job of a call the daemon's death cut off:
// thaw its containers and remove what it wrote (undoPodCheckpoint).
import { randomBytes } from 'node:crypto';
import { basename, isAbsolute } from 'node:path';
import { callerPathError, DeadlineExceeded, FailedPrecondition, Internal, InvalidArgument } from '../core/errors.js';
import { faultPoint } from '../core/faults.js';
import type { Logger } from '../core/log.js';
import { timerDelay } from '../core/time.js';
import {
  againOnFreezeRace, archiveCheckpoint, beginCheckpoint, copyRootfsChanges, dumpTarget, endCheckpoint, lateAsDeadline, resumeIfPaused,
  thawIfFrozen,
  type CheckpointWork,
} from './container-checkpoint.js';
import { containerNow, runtimeFor } from './container-refresh.js';
import type { PodContext } from './context.js';
import {
  attachmentsOf, containerArchive, firstRepeated, MANIFEST_VERSION, type PodCheckpointManifest,
} from './pod-checkpoint-manifest.js';
import {
  claimOutputDir, identityOf, openOutputDir, reclaimOutput, releaseClaimed, removeClaimed, writeManifest, type ClaimedOutput,
} from './pod-checkpoint-output.js';
import type { ContainerRecord, PodCheckpointIntent, SandboxRecord } from './records.js';
import { sandboxNow } from './sandbox-refresh.js';

export interface CheckpointPodRequest {
  podSandboxId: string;
  outputPath: string;
  containerIds: string[];
  options: Record<string, string>;
}

/** What the call gives besides its request: its log, its deadline (Unix ms, required) and the signal that ends at it. */
export interface CallLimits {
  log: Logger;
  signal: AbortSignal;
  deadline: number | undefined;
}

/** INVALID_ARGUMENT for what is wrong with the request itself, before anything is looked at. Pure. */
export function checkCheckpointPodRequest(req: CheckpointPodRequest, deadline: number | undefined): void {
  if (deadline === undefined) {
    throw new InvalidArgument('CheckpointPod needs a deadline on the call (its containers stay frozen while it runs): set a timeout');
  }
  checkNoOptions('CheckpointPod', req.options);
  if (!req.outputPath || !isAbsolute(req.outputPath)) {
    throw new InvalidArgument(`output_path "${req.outputPath}" is not an absolute path: give an existing empty directory`);
  }
  if (req.containerIds.length === 0) throw new InvalidArgument('container_ids is empty: name the pod\'s running containers to checkpoint');
  if (req.containerIds.includes('')) throw new InvalidArgument('container_ids has an empty id');
  const twice = firstRepeated(req.containerIds);
  if (twice !== undefined) throw new InvalidArgument(`container_ids names "${twice}" twice: name each container once`);
}

/** Options are runtime-specific and minicri has none: each given one is refused, not ignored. Pure. */
export function checkNoOptions(rpc: string, options: Record<string, string>): void {
  const keys = Object.keys(options);
  if (keys.length > 0) {
    throw new InvalidArgument(`${rpc} option${keys.length > 1 ? 's' : ''} ${keys.map((k) => `"${k}"`).join(', ')} `
      + 'not supported: minicri takes no options here; call it without them');
  }
}

export async function checkpointPod(ctx: PodContext, req: CheckpointPodRequest, call: CallLimits): Promise<void> {
  checkCheckpointPodRequest(req, call.deadline);
  const sandboxId = ctx.tables.sandboxes.find(req.podSandboxId).id;
  await (await openOutputDir(req.outputPath)).close();
  // The pod's lock, then each container's (sorted, as a pod's removal takes them): none changes meanwhile.
  await ctx.locks.run(sandboxId, () => withLocks(ctx, [...req.containerIds].sort(), async () => {
    const sandbox = await sandboxNow(ctx, sandboxId);
    if (sandbox.state !== 'SANDBOX_READY') {
      throw new FailedPrecondition(`sandbox ${sandboxId} is not ready (state ${sandbox.state}): only a running pod can be checkpointed`);
    }
    const records = await Promise.all(req.containerIds.map((id) => runningInPod(ctx, id, sandboxId)));
    const names = records.map((r) => r.config.metadata.name);
    const twice = firstRepeated(names);
    if (twice !== undefined) {
      throw new FailedPrecondition(`two containers named "${twice}" are listed: a restore matches containers by name; list one of them`);
    }
    // Again, and claimed: the directory may have changed while the locks were waited for.
    const claimed = await claimOutputDir(req.outputPath).catch((err: unknown) => { throw callerPathError(err, req.outputPath); });
    const intent: PodCheckpointIntent = {
      id: randomBytes(16).toString('hex'), sandboxId, containerIds: req.containerIds, outputPath: req.outputPath,
      output: identityOf(claimed),
    };
    ctx.tables.podCheckpoints.put(intent);
    const unthawed: string[] = [];
    let outputLeft = false;
    try {
      const beforeManifest = () => ctx.tables.podCheckpoints.put({ ...intent, manifest: true });
      await takeCheckpoint(ctx, sandbox, records, claimed, { ...call, unthawed }, beforeManifest);
      // The client no longer waits for an answer: a whole directory it was not told of would only be in its retry's way.
      if (call.signal.aborted) throw new Error('the checkpoint was whole only after the call had ended');
    } catch (err) {
      // The failure is the answer; what its cleanup left, the next start removes (the intent stays).
      await removeClaimed(claimed).catch((cleanup: unknown) => {
        outputLeft = true;
        call.log.error({ err: cleanup, outputPath: req.outputPath }, 'removing the output of a failed pod checkpoint failed');
      });
      throw lateAsDeadline(callerPathError(err, req.outputPath), call.signal,
        `checkpoint of pod ${sandboxId} did not finish before the call's deadline: its containers were thawed `
        + `and nothing was left in ${req.outputPath}; give it more time`);
    } finally {
      await releaseClaimed(claimed);
      // Containers left frozen keep the intent: the background retry (or the next start) thaws them; an output
      // left keeps it for the next start.
      if (unthawed.length > 0 || outputLeft) {
        ctx.tables.podCheckpoints.update(intent.id, (r) => { r.containerIds = unthawed; if (!outputLeft) r.thawOnly = true; });
      } else {
        ctx.tables.podCheckpoints.delete(intent.id);
      }
    }
    call.log.info({ outputPath: req.outputPath, containers: names }, 'pod checkpointed');
  }));
}

/** A call's limits, and where the ids of containers whose thaw failed go. */
type CheckpointCall = CallLimits & { unthawed: string[] };

/** The steps: work dirs → freeze all → dump each → thaw all (again if the freeze caught a process mid-exit) → archives → pod.json. */
async function takeCheckpoint(
  ctx: PodContext, sandbox: SandboxRecord, records: ContainerRecord[], out: ClaimedOutput, call: CheckpointCall, beforeManifest: () => void,
): Promise<void> {
  const works = await againOnFreezeRace(async () => {
    const made: CheckpointWork[] = [];
    try {
      for (const r of records) made.push(await beginCheckpoint(ctx, r));
      await frozenTogether(made, call);
      return made;
    } catch (err) {
      await Promise.all(made.map(endCheckpoint));
      throw err;
    }
  }, call.signal, call.log);
  try {
    for (const w of works) await archiveCheckpoint(ctx, w, out.containers.at(basename(containerArchive(w.record.id))), call.signal);
    faultPoint('pod-checkpoint-archived');
    const manifest = podManifest(sandbox, records, await ctx.network.deviceStatus(sandbox.id));
    out.manifest = true;
    beforeManifest();
    // A new file: the directory was empty; one that appeared meanwhile is not ours to replace.
    await writeManifest(out, `${JSON.stringify(manifest, null, 2)}\n`);
  } finally {
    await Promise.all(works.map(endCheckpoint));
  }
}

/**
 * How long past the call's deadline a dump under way may run to its own end before runc is stopped: a runc killed
 * mid-dump can leave a CRIU behind that freezes its container again once this call has thawed it.
 */
const DUMP_GRACE_MS = 30_000;

/**
 * Every container frozen, each dumped with its root filesystem changes while all are, then every one thawed. At
 * the deadline no new step begins; a dump under way ends first (within DUMP_GRACE_MS).
 */
async function frozenTogether(works: CheckpointWork[], { signal, log, deadline, unthawed }: CheckpointCall): Promise<void> {
  const frozen: CheckpointWork[] = [];
  const late = (what: string) => new DeadlineExceeded(`the call's deadline passed before every container was ${what}`);
  const dumpSignal = AbortSignal.timeout(timerDelay(Math.max(0, (deadline ?? Date.now()) - Date.now()) + DUMP_GRACE_MS));
  let failure: unknown;
  try {
    for (const w of works) {
      if (signal.aborted) throw late('frozen');
      // Listed first: a pause that fails half-way may leave it frozen, so it is thawed too.
      frozen.push(w);
      await w.runtime.pause(w.record.id);
    }
    faultPoint('pod-checkpoint-frozen');
    for (const w of works) {
      if (signal.aborted) throw late('dumped');
      // The pod's own connections (over loopback between its containers) are dumped with it; CRIU locks them meanwhile.
      await w.runtime.dump(w.record.id, { ...dumpTarget(w), signal: dumpSignal, tcpEstablished: true });
      await copyRootfsChanges(w, dumpSignal);
    }
    faultPoint('pod-checkpoint-dumped');
  } catch (err) {
    failure = err;
  }
  const thawed = await Promise.allSettled(frozen.map((w) => resumeIfPaused(w.runtime, w.record.id)));
  const stuck = thawed.flatMap((t, i) => (t.status === 'rejected' ? [{ id: frozen[i]!.record.id, err: t.reason as Error }] : []));
  for (const s of stuck) {
    log.error({ containerId: s.id, err: s.err }, 'container not thawed after its pod checkpoint; retried in the background');
  }
  unthawed.push(...stuck.map((s) => s.id));
  if (failure !== undefined) throw failure;
  if (stuck.length > 0) {
    throw new Internal(`pod checkpoint: container${stuck.length > 1 ? 's' : ''} ${stuck.map((s) => s.id).join(', ')} could not be thawed `
      + `(${stuck[0]!.err.message}); minicri tries again in the background`);
  }
}

function podManifest(
  sandbox: SandboxRecord, records: ContainerRecord[], devices: { devices: unknown[] } | undefined,
): PodCheckpointManifest {
  const m = sandbox.config.metadata;
  return {
    version: MANIFEST_VERSION,
    checkpointedAt: new Date().toISOString(),
    pod: { namespace: m.namespace, name: m.name, uid: m.uid },
    runtimeHandler: sandbox.runtimeHandler,
    config: sandbox.config,
    networks: attachmentsOf(sandbox),
    tcpEstablished: true,
    ...(devices ? { devices: devices.devices } : {}),
    containers: records.map((r) => ({
      name: r.config.metadata.name, id: r.id, archive: containerArchive(r.id), image: { id: r.image.id, name: r.image.name },
      command: r.config.command, args: r.config.args, workingDir: r.config.working_dir,
    })),
  };
}

/** A listed container: of this pod (INVALID_ARGUMENT) and running (FAILED_PRECONDITION). Unknown: NOT_FOUND. */
async function runningInPod(ctx: PodContext, id: string, sandboxId: string): Promise<ContainerRecord> {
  const found = ctx.tables.containers.find(id);
  if (found.id !== id) throw new InvalidArgument(`container_ids entry "${id}" is a prefix: give full container ids`);
  if (found.sandboxId !== sandboxId) {
    throw new InvalidArgument(`container ${id} belongs to pod ${found.sandboxId}, not to ${sandboxId}: list only this pod's containers`);
  }
  const record = await containerNow(ctx, id);
  if (record.state !== 'CONTAINER_RUNNING') {
    throw new FailedPrecondition(`container ${id} ("${record.config.metadata.name}") is ${record.state}, not running: `
      + 'only running containers are checkpointed; leave it out or start a new one');
  }
  return record;
}

function withLocks<T>(ctx: PodContext, keys: string[], fn: () => Promise<T>): Promise<T> {
  return keys.reduceRight<() => Promise<T>>((inner, key) => () => ctx.locks.run(key, inner), fn)();
}

/** The background retry of a CheckpointPod's failed thaw, under the locks the call takes. */
export async function retryPodThaw(ctx: PodContext, intent: PodCheckpointIntent, log: Logger): Promise<void> {
  await ctx.locks.run(intent.sandboxId, () => withLocks(ctx, [...intent.containerIds].sort(), async () => {
    if (ctx.tables.podCheckpoints.get(intent.id)) await undoPodCheckpoint(ctx, intent, log);
  }));
}

/**
 * Recovery of a CheckpointPod the daemon's death cut off, or whose thaw failed (thawOnly): its containers
 * thawed, its output removed, its intent gone.
 */
export async function undoPodCheckpoint(ctx: PodContext, intent: PodCheckpointIntent, log: Logger): Promise<void> {
  for (const id of intent.containerIds) {
    const record = ctx.tables.containers.get(id);
    const runtime = record && runtimeFor(ctx, record);
    const status = runtime && (await runtime.state(id))?.status;
    if (status !== 'running' && status !== 'paused') continue;
    if (await thawIfFrozen(runtime!, id)) log.warn({ containerId: id }, 'container was left frozen by a pod checkpoint: thawed it');
  }
  if (intent.thawOnly) {
    ctx.tables.podCheckpoints.delete(intent.id);
    return;
  }
  const claimed = await reclaimOutput(intent.outputPath, intent.output, intent.manifest ?? false);
  if (claimed) {
    try {
      await removeClaimed(claimed);
    } finally {
      await releaseClaimed(claimed);
    }
    log.warn({ sandboxId: intent.sandboxId, outputPath: intent.outputPath }, 'removed the output of a pod checkpoint cut off');
  } else {
    log.warn({ sandboxId: intent.sandboxId, outputPath: intent.outputPath },
      'the output directory of a pod checkpoint cut off is gone or was replaced: nothing removed there');
  }
  ctx.tables.podCheckpoints.delete(intent.id);
}
