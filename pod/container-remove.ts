// RemoveContainer: force-stop, runc delete, unmount and remove its rootfs, its directory and record.
// Idempotent: an unknown id is not an error.
import { rm } from 'node:fs/promises';
import { faultPoint } from '../core/faults.js';
import type { Deps } from './context.js';
import type { Logger } from '../core/log.js';
import { attemptRemoval } from './pending.js';
import type { RuntimeHandlers } from '../server/runtime-service.js';
import { runtimeOf } from './container-refresh.js';
import { stopContainer } from './container-stop.js';
import { inParallel } from '../core/undo.js';

/** Removes one container (the caller holds its lock). */
export async function removeContainer(deps: Deps, id: string, log: Logger): Promise<void> {
  const record = deps.tables.containers.get(id);
  if (!record) return;
  await stopContainer(deps, id, 0, log);
  // Its process is gone, so runc's state and the host's rootfs mount can go at once (a straggler in a
  // shared pod PID namespace keeps its own view of the rootfs until runc delete kills it).
  await inParallel([
    runtimeOf(deps, record).delete(id, { force: true }).then(() => faultPoint('container-runc-deleted')),
    deps.images.removeRootfs(id),
  ]);
  await rm(record.dir, { recursive: true, force: true });
  deps.tables.containers.delete(id);
  log.info({ containerId: id }, 'container removed');
}

export function containerRemoveHandlers(deps: Deps): RuntimeHandlers {
  return {
    RemoveContainer: async (request, ctx) => {
      const found = deps.tables.containers.lookup(request.container_id);
      if (found) await deps.locks.run(found.id, () => attemptRemoval(deps.tables.containers, found.id, () => removeContainer(deps, found.id, ctx.log)));
      return {};
    },
  };
}
