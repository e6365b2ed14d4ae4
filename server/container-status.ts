// ContainerStatus and ListContainers, from the records (refreshed from exit files for running ones).
import type { Deps } from '../pod/context.js';
import { matchesLabels } from '../pod/filters.js';
import type { RuntimeHandlers } from './runtime-service.js';
import { containerMayHaveExited, containerStatus, containerSummary, refreshContainer } from '../pod/container-refresh.js';
import { listedSummaries, type ListEncoder } from './list-encoding.js';

export function containerStatusHandlers(deps: Deps, encoder: ListEncoder): RuntimeHandlers {
  // Only a container's state changes what ListContainers says of it.
  const summaries = listedSummaries(deps.tables.containers, containerSummary, (r) => r.state, encoder);
  return {
    ContainerStatus: async (request) => {
      const record = await refreshContainer(deps, deps.tables.containers.find(request.container_id));
      const info: Record<string, string> = {};
      if (request.verbose) {
        info.info = JSON.stringify({ pid: record.pid ?? 0, sandboxId: record.sandboxId, bundle: record.dir, config: record.config });
      }
      return { status: containerStatus(record), info };
    },
    ListContainers: async (request) => {
      const filter = request.filter;
      const candidates = deps.tables.containers.list().filter((r) =>
        (!filter?.id || r.id.startsWith(filter.id))
        && (!filter?.pod_sandbox_id || r.sandboxId.startsWith(filter.pod_sandbox_id))
        && matchesLabels(r.config.labels, filter?.label_selector));
      // kubelet relists every second and almost always finds no exit to read: then no promise per record.
      const fresh = candidates.some((r) => containerMayHaveExited(deps, r)) ? await Promise.all(candidates.map((r) => refreshContainer(deps, r))) : candidates;
      return { containers: fresh.filter((r) => !filter?.state || r.state === filter.state.state).map((r) => summaries.get(r)) };
    },
  };
}
