// StopPodSandbox: the pod's containers and pause stopped, its network detached (pod/sandbox-stop.ts).
import { stopSandbox } from '../../pod/sandbox-stop.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function StopPodSandbox(edge: Edge): RuntimeRpc<'StopPodSandbox'> {
  return async (request, call) => {
    await stopSandbox(edge.pods, request.pod_sandbox_id, call.log);
    return {};
  };
}
