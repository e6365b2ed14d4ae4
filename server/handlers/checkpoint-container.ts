// CheckpointContainer: a CRIU checkpoint of a running container into an archive (pod/container-checkpoint.ts).
import { checkpointContainer } from '../../pod/container-checkpoint.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function CheckpointContainer(edge: Edge): RuntimeRpc<'CheckpointContainer'> {
  return async (request, call) => {
    await checkpointContainer(
      edge.pods, { idOrPrefix: request.container_id, location: request.location, timeoutSec: Number(request.timeout) }, call.log);
    return {};
  };
}
