// StopContainer: the stop signal, then SIGKILL after the timeout; idempotent (pod/container-stop.ts).
import { stopContainer } from '../../pod/container-stop.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function StopContainer(edge: Edge): RuntimeRpc<'StopContainer'> {
  return async (request, call) => {
    await stopContainer(edge.pods, request.container_id, Number(request.timeout), call.log);
    return {};
  };
}
