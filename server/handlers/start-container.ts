// StartContainer: `runc start` of a created container (pod/container-start.ts).
import { startContainer } from '../../pod/container-start.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function StartContainer(edge: Edge): RuntimeRpc<'StartContainer'> {
  return async (request, call) => {
    await startContainer(edge.pods, request.container_id, call.log);
    return {};
  };
}
