// ListPodSandboxMetrics: every pod's metrics, sampled at the call (pod/metrics.ts).
import { listSandboxMetrics } from '../../pod/metrics.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function ListPodSandboxMetrics(edge: Edge): RuntimeRpc<'ListPodSandboxMetrics'> {
  return async () => ({ pod_metrics: await listSandboxMetrics(edge.pods) });
}
