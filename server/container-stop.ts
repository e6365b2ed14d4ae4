// StopContainer: the image's stop signal, then SIGKILL after the timeout. Idempotent.
import { checkpoint } from './checkpoint.js';
import type { Deps } from './deps.js';
import type { Logger } from './log.js';
import type { RuntimeHandlers } from './runtime-service.js';
import { refreshContainer, runtimeOf } from './container-common.js';

/** Stops one container (the caller holds its lock); a container that is not running is left as is. */
export async function stopContainer(deps: Deps, id: string, timeoutSec: number, log: Logger): Promise<void> {
  const record = await refreshContainer(deps, deps.tables.containers.find(id));
  if (record.state === 'CONTAINER_EXITED') return;
  const runtime = runtimeOf(deps, record);
  if (record.state === 'CONTAINER_RUNNING') {
    await runtime.stop(id, { timeoutSec, signal: record.stopSignal });
    checkpoint('container-stopped');
    await refreshContainer(deps, record);
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
