// RemovePodSandbox: stop it if needed, remove its containers, the pause, its rootfs, dirs and record.
// Idempotent: an unknown id is not an error.
import { rm } from 'node:fs/promises';
import { removeContainer } from './container-remove.js';
import type { Deps } from './deps.js';
import type { RuntimeHandlers } from './runtime-service.js';
import { stopSandbox } from './sandbox-stop.js';

export function sandboxRemoveHandlers(deps: Deps): RuntimeHandlers {
  return {
    RemovePodSandbox: async (request, ctx) => {
      const found = deps.tables.sandboxes.lookup(request.pod_sandbox_id);
      if (!found) return {};
      await deps.locks.run(found.id, async () => {
        const record = await stopSandbox(deps, found.id, ctx.log);
        for (const container of deps.tables.containers.list().filter((c) => c.sandboxId === record.id)) {
          await deps.locks.run(container.id, () => removeContainer(deps, container.id, ctx.log));
        }
        await deps.runtimes.get(record.runtimeHandler)?.delete(record.id, { force: true });
        await deps.images.removeRootfs(record.id);
        await rm(record.dir, { recursive: true, force: true });
        if (record.shm) await rm(record.shm, { recursive: true, force: true });
        deps.tables.sandboxes.delete(record.id);
        ctx.log.info('sandbox removed');
      });
      return {};
    },
  };
}
