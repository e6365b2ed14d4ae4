// RemovePodSandbox: the pod and everything it holds removed; idempotent (pod/sandbox-remove.ts).
import { removeSandbox } from '../../pod/sandbox-remove.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function RemovePodSandbox(edge: Edge): RuntimeRpc<'RemovePodSandbox'> {
  return async (request, call) => {
    await removeSandbox(edge.pods, request.pod_sandbox_id, call.log);
    return {};
  };
}
