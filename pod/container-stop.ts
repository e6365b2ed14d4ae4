// StopContainer: the image's stop signal, then SIGKILL after the timeout. Idempotent.
import { faultPoint } from '../core/faults.js';
import type { Deps } from './context.js';
import type { Logger } from '../core/log.js';
import type { RuntimeHandlers } from '../server/runtime-service.js';
import { recordExit, refreshContainer, runtimeOf } from './container-refresh.js';
import { NotFound } from '../core/errors.js';

/** Stops one container (the caller holds its lock); a container that is not running is left as is. */
export async function stopContainer(deps: Deps, id: string, timeoutSec: number, log: Logger): Promise<void> {
  // Looked up under the lock: a Remove that held it before us may have taken the container away.
  const found = deps.tables.containers.get(id);
  if (!found) return;
  const record = await refreshContainer(deps, found);
  if (record.state === 'CONTAINER_EXITED') return;
  const runtime = runtimeOf(deps, record);
  if (record.state === 'CONTAINER_RUNNING') {
    // runc no longer knowing the container means it is not running: stopped is what was asked.
    await runtime.stop(id, { timeoutSec, signal: record.stopSignal }).catch((err: unknown) => { if (!(err instanceof NotFound)) throw err; });
    faultPoint('container-stopped');
    // Read directly, not through the exit watcher, which may not have seen the file yet.
    recordExit(deps, id, await runtime.exitStatus(id));
  } else {
    // Created but never started: there is no process to signal; it simply never ran.
    await runtime.delete(id, { force: true });
    // Not 0: a container that never ran must not read as a success.
    deps.tables.containers.update(id, (r) => { r.state = 'CONTAINER_EXITED'; r.exitCode = 255; r.reason = 'Error'; r.message = 'stopped before it was started'; });
  }
  log.info({ containerId: id }, 'container stopped');
}

export function containerStopHandlers(deps: Deps): RuntimeHandlers {
  return {
    StopContainer: async (request, ctx) => {
      const { id } = deps.tables.containers.find(request.container_id);
      const timeout = Math.max(0, Number(request.timeout));
      await deps.locks.run(id, () => stopContainer(deps, id, timeout, ctx.log));
      return {};
    },
  };
}
