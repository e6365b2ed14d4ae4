// CheckpointPod: chosen running containers of a pod, frozen together and dumped into a directory (pod/pod-checkpoint.ts).
import { checkpointPod } from '../../pod/pod-checkpoint.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function CheckpointPod(edge: Edge): RuntimeRpc<'CheckpointPod'> {
  return async (request, call) => {
    await checkpointPod(edge.pods, {
      podSandboxId: request.pod_sandbox_id, outputPath: request.output_path, containerIds: request.container_ids, options: request.options,
    }, { log: call.log, signal: call.signal, deadline: call.deadline });
    return {};
  };
}
