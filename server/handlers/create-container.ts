// CreateContainer: root filesystem, OCI spec, `runc create` under conmon (pod/container-create.ts).
import { createContainer } from '../../pod/container-create.js';
import { criSignalNumberOf } from '../../pod/stop-signal.js';
import type { Edge } from '../edge.js';
import { criEnumNumbers } from '../proto.js';
import type { RuntimeRpc } from '../service.js';

export function CreateContainer(edge: Edge): RuntimeRpc<'CreateContainer'> {
  // The Signal enum is read by its numbers, which stay when cri-api renames it (v0.37: SIGNAL_ prefixes).
  const signals = criEnumNumbers('Signal');
  return async (request, call) => ({
    container_id: await createContainer(edge.pods, request.pod_sandbox_id, request.config, request.sandbox_config, call.log,
      criSignalNumberOf(request.config?.stop_signal, signals)),
  });
}
