// RemoveContainer: force-stop, runc delete, unmount and remove its rootfs, its directory and record.
// Idempotent: an unknown id is not an error.
import { rm } from 'node:fs/promises';
import { faultPoint } from '../core/faults.js';
import type { Logger } from '../core/log.js';
import { inParallel } from '../core/undo.js';
import { usernsStagingEntry } from '../oci/runtime/userns.js';
import { runtimeOf } from './container-refresh.js';
import { stopContainerLocked } from './container-stop.js';
import type { PodContext } from './context.js';
import { releaseImageVolumes } from './image-volumes.js';
import { attemptRemoval } from './removal.js';

/** Removes the container with that id or unique prefix, if there is one; a failure is retried in the background. */
export async function removeContainer(ctx: PodContext, idOrPrefix: string, log: Logger): Promise<void> {
  const found = ctx.tables.containers.lookup(idOrPrefix);
  if (found) await ctx.locks.run(found.id, () => attemptRemoval(ctx.tables.containers, found.id, () => removeContainerLocked(ctx, found.id, log)));
}

/** Removes one container (the caller holds its lock). */
export async function removeContainerLocked(ctx: PodContext, id: string, log: Logger): Promise<void> {
  const record = ctx.tables.containers.get(id);
  if (!record) return;
  await stopContainerLocked(ctx, id, 0, log);
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
  ctx.tables.containers.delete(id);
  const madeHostPaths = ctx.tables.hostPaths.list().filter((h) => h.containerId === id).map((h) => h.id);
  log.info({ containerId: id, ...(madeHostPaths.length ? { keptHostPaths: madeHostPaths } : {}) }, 'container removed');
}
