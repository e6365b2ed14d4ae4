// PodSandboxStats: a pod's usage, its pause and its containers together (pod/stats.ts).
import { statsOfSandbox } from '../../pod/stats.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function PodSandboxStats(edge: Edge): RuntimeRpc<'PodSandboxStats'> {
  return async (request) => ({ stats: await statsOfSandbox(edge.pods, request.pod_sandbox_id) });
}
