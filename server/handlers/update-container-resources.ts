// UpdateContainerResources: `runc update` of a container's cgroup limits (pod/container-update.ts).
import { updateContainerResources } from '../../pod/container-update.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function UpdateContainerResources(edge: Edge): RuntimeRpc<'UpdateContainerResources'> {
  return async (request, call) => {
    await updateContainerResources(edge.pods, request.container_id, request.linux, call.log);
    return {};
  };
}
