// RemovePodSandbox: stop it if needed, remove its containers, the pause, its rootfs, dirs and record.
// Idempotent: an unknown id is not an error.
import { rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { removeContainer } from './container-remove.js';
import { faultPoint } from '../core/faults.js';
import type { Deps } from './context.js';
import type { Logger } from '../core/log.js';
import { attemptRemoval } from './pending.js';
import type { RuntimeHandlers } from '../server/runtime-service.js';
import { stopSandbox } from './sandbox-stop.js';
import { inParallel } from '../core/undo.js';

/** Removes one sandbox and everything it holds (the caller holds its lock). Also used by recovery. */
export async function removeSandbox(deps: Deps, id: string, log: Logger): Promise<void> {
  const record = await stopSandbox(deps, id, log);
  if (!record) return;
  for (const container of deps.tables.containers.list().filter((c) => c.sandboxId === record.id)) {
    await deps.locks.run(container.id, () => removeContainer(deps, container.id, log));
  }
  // The pause is dead (stopped above), so its runc state and its root filesystem can go at once.
  await inParallel([
    deps.runtimes.get(record.runtimeHandler)?.delete(record.id, { force: true }).then(() => faultPoint('pause-deleted')),
    deps.images.removeRootfs(record.id).then(() => faultPoint('pause-rootfs-removed')),
  ]);
  await inParallel([rm(record.dir, { recursive: true, force: true }), record.shm && rm(dirname(record.shm), { recursive: true, force: true })]);
  deps.tables.sandboxes.delete(record.id);
  log.info({ sandboxId: record.id }, 'sandbox removed');
}

export function sandboxRemoveHandlers(deps: Deps): RuntimeHandlers {
  return {
    RemovePodSandbox: async (request, ctx) => {
      const found = deps.tables.sandboxes.lookup(request.pod_sandbox_id);
      if (found) await deps.locks.run(found.id, () => attemptRemoval(deps.tables.sandboxes, found.id, () => removeSandbox(deps, found.id, ctx.log)));
      return {};
    },
  };
}
