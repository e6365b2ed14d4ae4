// CreateContainer: root filesystem, OCI spec, `runc create` under conmon (pod/container-create.ts).
import { createContainer } from '../../pod/container-create.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function CreateContainer(edge: Edge): RuntimeRpc<'CreateContainer'> {
  return async (request, call) => ({
    container_id: await createContainer(edge.pods, request.pod_sandbox_id, request.config, request.sandbox_config, call.log),
  });
}
