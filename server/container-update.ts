// UpdateContainerResources (runc update) and ReopenContainerLog (conmon reopens the log file).
import { linuxResources } from '../oci/runtime/spec/resources.js';
import type { Deps } from '../pod/context.js';
import { FailedPrecondition } from '../core/errors.js';
import type { RuntimeHandlers } from './runtime-service.js';
import { refreshContainer, runtimeOf } from '../pod/container-refresh.js';

export function containerUpdateHandlers(deps: Deps): RuntimeHandlers {
  return {
    UpdateContainerResources: async (request, ctx) => {
      const { id } = deps.tables.containers.find(request.container_id);
      await deps.locks.run(id, async () => {
        const record = await refreshContainer(deps, deps.tables.containers.find(id));
        if (record.state === 'CONTAINER_EXITED') throw new FailedPrecondition(`container ${id} has exited: its resources cannot be updated`);
        if (request.linux) {
          await runtimeOf(deps, record).update(id, linuxResources(request.linux));
          deps.tables.containers.update(id, (r) => { r.config.linux = { ...(r.config.linux ?? { security_context: null }), resources: request.linux } as typeof r.config.linux; });
        }
        ctx.log.info('container resources updated');
      });
      return {};
    },
    ReopenContainerLog: async (request) => {
      const record = await refreshContainer(deps, deps.tables.containers.find(request.container_id));
      if (record.state !== 'CONTAINER_RUNNING') throw new FailedPrecondition(`container ${record.id} is not running: its log cannot be reopened`);
      await runtimeOf(deps, record).reopenLog(record.id);
      return {};
    },
  };
}
