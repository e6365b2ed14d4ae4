// ContainerStatus: from the record, refreshed from conmon's exit file, with the image's name as it is now; verbose
// adds the pid, bundle, config and startup timeline.
import { containerNow } from '../../pod/container-refresh.js';
import { containerStatus } from '../cri-views.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function ContainerStatus(edge: Edge): RuntimeRpc<'ContainerStatus'> {
  return async (request) => {
    const record = await containerNow(edge.pods, request.container_id);
    const info: Record<string, string> = {};
    if (request.verbose) {
      // timeline: how long each step of CreateContainer and StartContainer took.
      info.info = JSON.stringify({
        pid: record.pid ?? 0, sandboxId: record.sandboxId, bundle: record.dir, config: record.config, timeline: record.timeline ?? [],
      });
    }
    return { status: containerStatus(record, edge.images), info };
  };
}
