// StartContainer: `runc start` on a CREATED container; conmon already holds its stdio and log.
import { faultPoint } from '../core/faults.js';
import type { Deps } from './context.js';
import { FailedPrecondition } from '../core/errors.js';
import { nowNanos } from './records.js';
import type { RuntimeHandlers } from '../server/runtime-service.js';
import { runtimeOf } from './container-refresh.js';

export function containerStartHandlers(deps: Deps): RuntimeHandlers {
  return {
    StartContainer: async (request, ctx) => {
      const { id } = deps.tables.containers.find(request.container_id);
      await deps.locks.run(id, async () => {
        const record = deps.tables.containers.find(id);
        if (record.state !== 'CONTAINER_CREATED') {
          throw new FailedPrecondition(`container ${id} is ${record.state}, not CONTAINER_CREATED: only a created container can be started`);
        }
        // Taken before runc start: the process may be done (and its finish time set) by the time start returns.
        const startedAt = nowNanos();
        try {
          await runtimeOf(deps, record).start(id);
          faultPoint('container-started');
        } catch (err) {
          // A container that failed to start is over; kubelet reads the reason and creates a new one.
          deps.tables.containers.update(id, (r) => {
            r.state = 'CONTAINER_EXITED'; r.exitCode = 128; r.reason = 'StartError'; r.message = (err as Error).message; r.finishedAt = nowNanos();
          });
          throw err;
        }
        deps.tables.containers.update(id, (r) => { r.state = 'CONTAINER_RUNNING'; r.startedAt = startedAt; });
        ctx.log.info('container started');
      });
      return {};
    },
  };
}
