// RestorePod: a new sandbox with every container of a CheckpointPod directory, CREATED (pod/pod-restore.ts).
import { restorePod } from '../../pod/pod-restore.js';
import { criSignalNumberOf } from '../../pod/stop-signal.js';
import type { Edge } from '../edge.js';
import { criEnumNumbers } from '../proto.js';
import type { RuntimeRpc } from '../service.js';

export function RestorePod(edge: Edge): RuntimeRpc<'RestorePod'> {
  // The Signal enum by its numbers, as CreateContainer reads it.
  const signals = criEnumNumbers('Signal');
  return async (request, call) => {
    const { podSandboxId, restored } = await restorePod(edge.pods, {
      checkpointPath: request.checkpoint_path, config: request.config, runtimeHandler: request.runtime_handler, options: request.options,
      containerConfigs: request.container_configs,
      stopSignals: request.container_configs.map((c) => criSignalNumberOf(c.stop_signal, signals)),
    }, { log: call.log, signal: call.signal, deadline: call.deadline });
    return {
      pod_sandbox_id: podSandboxId,
      restored_containers: restored.map((r) => ({ name: r.name, container_id: r.containerId })),
    };
  };
}
