// RemoveContainer. First the container stops being: stopped if it still ran, its record moved to the cleanup
// table (so it is gone from every list and status, and its name is free). Then what it held on the host (runc
// state, the rootfs mount, its directory, image volumes) is released from that cleanup record, and the answer
// waits for that (a while at most): done beside the calls that follow, its few dozen file operations slowed
// kubelet's next relist by milliseconds. A failure is retried (pending.ts), a crash is finished at the next
// start (recovery.ts), and removing its sandbox waits for it. Idempotent: an unknown id is not an error.
import { rm } from 'node:fs/promises';
import { faultPoint } from '../core/faults.js';
import type { Logger } from '../core/log.js';
import { settledWithin } from '../core/time.js';
import { inParallel } from '../core/undo.js';
import { usernsStagingEntry } from '../oci/runtime/userns.js';
import { runtimeOf } from './container-refresh.js';
import { stopContainerLocked } from './container-stop.js';
import type { PodContext } from './context.js';
import { releaseImageVolumes } from './image-volumes.js';
import { attemptRemoval, removalBegun } from './removal.js';

/**
 * How long RemoveContainer waits for the host cleanup's first try: one that hangs (an unmount of a busy
 * filesystem) or fails goes on, or is retried, in the background, and the container is removed all the same.
 */
export const CLEANUP_WAIT_MS = 2_000;

/** Removes the container with that id or unique prefix, if there is one, and releases what it held on the host. */
export async function removeContainer(ctx: PodContext, idOrPrefix: string, log: Logger): Promise<void> {
  const found = ctx.tables.containers.lookup(idOrPrefix);
  if (!found) return;
  await ctx.locks.run(found.id, () => attemptRemoval(ctx.tables.containers, found.id, () => retireContainerLocked(ctx, found.id, log)));
  // Waited for also by a call that a concurrent one beat to the record (its try finds nothing left to do).
  if (!ctx.tables.containerCleanups.get(found.id)) return;
  const cleanup = ctx.background.run(`cleanup of removed container ${found.id}`, () => finishContainerCleanup(ctx, found.id, log));
  await settledWithin(cleanup, CLEANUP_WAIT_MS);
}

/** Removes one container and waits for its cleanup (the caller holds its lock): sandbox removal, recovery, retries. */
export async function removeContainerLocked(ctx: PodContext, id: string, log: Logger): Promise<void> {
  if (await retireContainerLocked(ctx, id, log)) await finishContainerCleanupLocked(ctx, id, log);
}

/** Finishes a removed container's cleanup, if it is still pending, under the container's lock. */
export function finishContainerCleanup(ctx: PodContext, id: string, log: Logger): Promise<void> {
  return ctx.locks.run(id, () => finishContainerCleanupLocked(ctx, id, log));
}

/** Finishes a removed container's cleanup, if it is still pending (the caller holds its lock). */
export async function finishContainerCleanupLocked(ctx: PodContext, id: string, log: Logger): Promise<void> {
  await attemptRemoval(ctx.tables.containerCleanups, id, () => cleanUpContainerLocked(ctx, id, log));
}

/** Stops the container and moves its record to the cleanup table; false when it was gone already. */
async function retireContainerLocked(ctx: PodContext, id: string, log: Logger): Promise<boolean> {
  if (!ctx.tables.containers.get(id)) return false;
  await stopContainerLocked(ctx, id, 0, log);
  const { removing: _, ...stopped } = ctx.tables.containers.get(id)!;
  // Written before the record goes: a crash between the two leaves both, and the container's removal,
  // already marked on its record, is redone at the next start.
  ctx.tables.containerCleanups.put({ ...stopped, removing: removalBegun() });
  ctx.tables.containers.delete(id);
  faultPoint('container-retired');
  const madeHostPaths = ctx.tables.hostPaths.list().filter((h) => h.containerId === id).map((h) => h.id);
  log.info({ containerId: id, ...(madeHostPaths.length ? { keptHostPaths: madeHostPaths } : {}) }, 'container removed');
  return true;
}

/** Releases a removed container's host objects, then its cleanup record (the caller holds its lock). */
async function cleanUpContainerLocked(ctx: PodContext, id: string, log: Logger): Promise<void> {
  const record = ctx.tables.containerCleanups.get(id);
  if (!record) return;
  // Its process is gone, so runc's state and the host's rootfs mount can go at once (a straggler in a
  // shared pod PID namespace keeps its own view of the rootfs until runc delete kills it).
  await inParallel([
    runtimeOf(ctx, record).delete(id, { force: true, bundle: record.dir }).then(() => faultPoint('container-runc-deleted')),
    ctx.images.removeRootfs(id),
    // A user-namespaced container's staging entry (nothing when it had none).
    ctx.host.unstageUserns(usernsStagingEntry(ctx.settings.state_dir, id)),
  ]);
  // After runc delete: no process of the container holds the image volumes any more.
  await releaseImageVolumes(ctx, record, log);
  await rm(record.dir, { recursive: true, force: true });
  ctx.tables.containerCleanups.delete(id);
  log.debug({ containerId: id }, 'removed container cleaned up');
}
