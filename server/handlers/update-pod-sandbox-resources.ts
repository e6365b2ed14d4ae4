// UpdatePodSandboxResources: the pod's resources after a resize, recorded and written to the pod cgroup (pod/sandbox-update.ts).
import { updateSandboxResources } from '../../pod/sandbox-update.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function UpdatePodSandboxResources(edge: Edge): RuntimeRpc<'UpdatePodSandboxResources'> {
  return async (request, call) => {
    await updateSandboxResources(edge.pods, request.pod_sandbox_id, request.overhead, request.resources, call.log);
    return {};
  };
}
