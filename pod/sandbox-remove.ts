// RemovePodSandbox: stop it if needed, remove its containers (and finish the cleanups of those removed
// before), the pause, its rootfs, dirs and record.
// Idempotent: an unknown id is not an error.
import { rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { faultPoint } from '../core/faults.js';
import type { Logger } from '../core/log.js';
import { inParallel } from '../core/undo.js';
import { usernsStagingEntry } from '../oci/runtime/userns.js';
import { finishContainerCleanup, removeContainerLocked } from './container-remove.js';
import type { PodContext } from './context.js';
import { attemptRemoval } from './removal.js';
import { stopSandboxLocked } from './sandbox-stop.js';

/** Removes the sandbox with that id or unique prefix, if there is one; a failure is retried in the background. */
export async function removeSandbox(ctx: PodContext, idOrPrefix: string, log: Logger): Promise<void> {
  const found = ctx.tables.sandboxes.lookup(idOrPrefix);
  if (found) {
    await ctx.locks.run(found.id, () => attemptRemoval(ctx.tables.sandboxes, found.id, () => removeSandboxLocked(ctx, found.id, log)));
  }
}

/** Removes one sandbox and everything it holds (the caller holds its lock). Also used by recovery. */
export async function removeSandboxLocked(ctx: PodContext, id: string, log: Logger): Promise<void> {
  const record = await stopSandboxLocked(ctx, id, log);
  if (!record) return;
  for (const container of ctx.tables.containers.list().filter((c) => c.sandboxId === record.id)) {
    await ctx.locks.run(container.id, () => removeContainerLocked(ctx, container.id, log));
  }
  // Containers removed before still releasing what they held: the pod's own objects go after theirs.
  for (const cleanup of ctx.tables.containerCleanups.list().filter((c) => c.sandboxId === record.id)) {
    await finishContainerCleanup(ctx, cleanup.id, log);
  }
  // The pause is dead (stopped above), so its runc state and its root filesystem can go at once.
  await inParallel([
    ctx.runtimes.get(record.runtimeHandler)?.delete(record.id, { force: true, bundle: record.dir }).then(() => faultPoint('pause-deleted')),
    ctx.images.removeRootfs(record.id).then(() => faultPoint('pause-rootfs-removed')),
    ctx.host.unstageUserns(usernsStagingEntry(ctx.settings.state_dir, record.id)),
  ]);
  await inParallel([
    rm(record.dir, { recursive: true, force: true }),
    record.shm && rm(dirname(record.shm), { recursive: true, force: true }),
  ]);
  ctx.tables.sandboxes.delete(record.id);
  log.info({ sandboxId: record.id }, 'sandbox removed');
}
