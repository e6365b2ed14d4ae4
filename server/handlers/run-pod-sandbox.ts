// RunPodSandbox: a pod's namespaces, network and pause container (pod/sandbox-run.ts).
import { runSandbox } from '../../pod/sandbox-run.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function RunPodSandbox(edge: Edge): RuntimeRpc<'RunPodSandbox'> {
  return async (request, call) => ({ pod_sandbox_id: await runSandbox(edge.pods, request.config, request.runtime_handler, call.log) });
}
