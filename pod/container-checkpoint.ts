// CheckpointContainer: a CRIU checkpoint of a running container, which keeps running, into an archive at the
// caller's path in the layout CRI-O and Podman use (oci/runtime/checkpoint-layout.ts). Everything is
// assembled in a work dir in the container's directory, which goes whatever happens; the archive appears
// whole or not at all.
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { dirname, isAbsolute, join } from 'node:path';
import { callerPathError, Cancelled, DeadlineExceeded, FailedPrecondition, InvalidArgument, Unavailable } from '../core/errors.js';
import { retry } from '../core/retry.js';
import type { Logger } from '../core/log.js';
import { writeArchive, writeCheckpointFiles, writeRootfsDiff } from '../oci/runtime/checkpoint-archive.js';
import { readBundleSpec } from '../oci/runtime/bundle.js';
import { CHECKPOINT_DIR } from '../oci/runtime/checkpoint-layout.js';
import { containerNow, handlerOf, runtimeOf } from './container-refresh.js';
import type { PodContext } from './context.js';
import type { ContainerRuntime } from './interfaces.js';
import type { ContainerRecord } from './records.js';
import { exists } from '../core/fs.js';
import { faultPoint } from '../core/faults.js';
import { timerDelay } from '../core/time.js';

/** What a checkpoint may take when the request leaves it to the runtime (kubelet's own CRI timeout is 2 minutes). */
export const DEFAULT_CHECKPOINT_TIMEOUT_SEC = 120;

/** The work dirs of checkpoints in a container's dir: mkdtemp names them with this prefix. */
export const CHECKPOINT_WORK_PREFIX = 'checkpoint-';

/** The archive path as given, when usable: absolute, naming a file. Pure. */
export function checkpointLocation(location: string): string {
  if (!location) throw new InvalidArgument('checkpoint location is empty: give the absolute path of the archive to write');
  if (!isAbsolute(location)) throw new InvalidArgument(`checkpoint location "${location}" is not an absolute path`);
  if (location.endsWith('/')) {
    throw new InvalidArgument(`checkpoint location "${location}" names a directory: give the path of the archive file to write`);
  }
  return location;
}

/** The request's timeout in ms: 0 is the default, negative is refused. Pure. */
export function checkpointTimeoutMs(timeoutSec: number): number {
  if (!Number.isFinite(timeoutSec) || timeoutSec < 0) {
    throw new InvalidArgument(
      `checkpoint timeout ${timeoutSec} must be 0 (the default, ${DEFAULT_CHECKPOINT_TIMEOUT_SEC} s) or a number of seconds`);
  }
  return (timeoutSec || DEFAULT_CHECKPOINT_TIMEOUT_SEC) * 1000;
}

export async function checkpointContainer(
  ctx: PodContext, req: { idOrPrefix: string; location: string; timeoutSec: number }, log: Logger,
): Promise<void> {
  const location = checkpointLocation(req.location);
  const timeoutMs = checkpointTimeoutMs(req.timeoutSec);
  const { id } = ctx.tables.containers.find(req.idOrPrefix);
  await checkLocationFree(location);
  await ctx.locks.run(id, async () => {
    const record = await containerNow(ctx, id);
    if (record.state !== 'CONTAINER_RUNNING') {
      throw new FailedPrecondition(`container ${id} is ${record.state}, not running: only a running container can be checkpointed`);
    }
    const signal = AbortSignal.timeout(timerDelay(timeoutMs));
    const late = `checkpoint of container ${id} did not finish within ${timeoutMs / 1000} s; nothing was written`;
    const w = await againOnFreezeRace(async () => {
      const w = await beginCheckpoint(ctx, record);
      try {
        await w.runtime.checkpoint(id, {
          ...dumpTarget(w), signal, whileFrozen: () => { faultPoint('container-checkpoint-dumped'); return copyRootfsChanges(w, signal); },
        });
        return w;
      } catch (err) {
        await endCheckpoint(w);
        throw err;
      }
    }, signal, log).catch((err: unknown) => { throw lateAsDeadline(err, signal, late); });
    try {
      await archiveCheckpoint(ctx, w, location, signal);
    } catch (err) {
      throw lateAsDeadline(callerPathError(err, location), signal, late);
    } finally {
      await endCheckpoint(w);
    }
    log.info({ location }, 'container checkpointed');
  });
}

/** One container's checkpoint under way: its record, runtime and bundle, and the work dir it is assembled in. */
export interface CheckpointWork {
  record: ContainerRecord;
  runtime: ContainerRuntime;
  bundle: Awaited<ReturnType<typeof readBundleSpec>>;
  /** In the container's directory, named with CHECKPOINT_WORK_PREFIX: recovery removes one a crash left. */
  work: string;
}

/** The work dir of a running container's checkpoint; endCheckpoint removes it. */
export async function beginCheckpoint(ctx: PodContext, record: ContainerRecord): Promise<CheckpointWork> {
  const runtime = runtimeOf(ctx, record);
  const bundle = await readBundleSpec(record.dir);
  return { record, runtime, bundle, work: await mkdtemp(join(record.dir, CHECKPOINT_WORK_PREFIX)) };
}

export async function endCheckpoint(w: CheckpointWork): Promise<void> {
  await rm(w.work, { recursive: true, force: true });
}

/** Where the dump writes CRIU's images and its log. */
export function dumpTarget(w: CheckpointWork): { imagePath: string; workPath: string } {
  return { imagePath: join(w.work, CHECKPOINT_DIR), workPath: w.work };
}

/** The container's root filesystem changes, copied while it is frozen so that they match its dumped memory. */
export async function copyRootfsChanges(w: CheckpointWork, signal: AbortSignal): Promise<void> {
  if (w.record.rootfsUpper) await writeRootfsDiff(w.record.rootfsUpper, w.work, w.bundle.spec.mounts ?? [], signal);
}

/** Once dumped: the layout's other files beside CRIU's, and the whole as one archive at `location`. */
export async function archiveCheckpoint(ctx: PodContext, w: CheckpointWork, location: string, signal: AbortSignal): Promise<void> {
  const { record } = w;
  await writeCheckpointFiles(w.work, {
    id: record.id, name: record.config.metadata.name, image: { id: record.image.id, name: record.image.name },
    runtimeHandler: handlerOf(ctx, record), createdAt: record.createdAt, pod: podOf(ctx, record.sandboxId),
  }, w.bundle, new Date());
  await writeArchive(w.work, location, signal);
}

/**
 * Thaws a container a cut-off checkpoint may have left frozen; true when it was. A dump still running goes
 * first (it would freeze the container again as it ends).
 */
export async function thawIfFrozen(runtime: ContainerRuntime, id: string): Promise<boolean> {
  await runtime.stopCutOffDumps(id);
  return resumeIfPaused(runtime, id);
}

/** Resumes a container that may be frozen; true when it was (runc's "not paused" means it was not). */
export function resumeIfPaused(runtime: ContainerRuntime, id: string): Promise<boolean> {
  return runtime.resume(id).then(() => true, (err: Error) => {
    if (/not paused/.test(err.message)) return false;
    throw err;
  });
}

/** Tries of a freeze and dump in all: more than one only when the freeze caught a process mid-exit. */
const FREEZE_ATTEMPTS = 3;

/**
 * `freezeAndDump` (which leaves nothing behind when it fails) again while its failure is a freeze that caught a
 * process mid-exit (runcDump's UNAVAILABLE): the process is gone by the next freeze.
 */
export function againOnFreezeRace<T>(freezeAndDump: () => Promise<T>, signal: AbortSignal, log: Logger): Promise<T> {
  return retry(freezeAndDump, {
    attempts: FREEZE_ATTEMPTS, signal, backoffMs: 50, retryable: (err) => err instanceof Unavailable,
    onRetry: (err, attempt) => log.info({ attempt, err: (err as Error).message }, 'a freeze caught a process mid-exit: checkpoint again'),
  });
}

/**
 * A step that failed because time ran out says so, whatever its own error was; one the client cancelled says
 * that (the signal's reason tells them apart).
 */
export function lateAsDeadline(err: unknown, signal: AbortSignal, message: string): unknown {
  if (!signal.aborted || err instanceof DeadlineExceeded || err instanceof Cancelled) return err;
  if (signal.reason instanceof Cancelled) return new Cancelled(signal.reason.message, { cause: err });
  return new DeadlineExceeded(message, { cause: err });
}

/** The pod's metadata, which the archive records so that it restores only into the same namespace. */
function podOf(ctx: PodContext, sandboxId: string): { namespace: string; name: string; uid: string } {
  const m = ctx.tables.sandboxes.find(sandboxId).config.metadata;
  return { namespace: m.namespace, name: m.name, uid: m.uid };
}

/** INVALID_ARGUMENT unless `location` is free and its directory exists. */
async function checkLocationFree(location: string): Promise<void> {
  if (await exists(location)) {
    throw new InvalidArgument(`checkpoint location ${location} already exists: choose a new path (an archive is never overwritten)`);
  }
  const dir = await stat(dirname(location)).catch(() => undefined);
  if (!dir?.isDirectory()) {
    throw new InvalidArgument(`checkpoint location ${location}: directory ${dirname(location)} does not exist; create it first`);
  }
}
