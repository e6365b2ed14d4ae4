// StreamPodSandboxMetrics: ListPodSandboxMetrics in chunks, so a large node's answer need not fit one message.
import { listSandboxMetrics } from '../../pod/metrics.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

/** Pods per message: a pod with a few containers is some tens of kilobytes of metrics. */
const PODS_PER_CHUNK = 20;

export function StreamPodSandboxMetrics(edge: Edge): RuntimeRpc<'StreamPodSandboxMetrics'> {
  return async (_request, emit) => {
    const pods = await listSandboxMetrics(edge.pods);
    // Each chunk holds at least one pod: a node without pods answers with no message and an OK status.
    for (let i = 0; i < pods.length; i += PODS_PER_CHUNK) emit({ pod_sandbox_metrics: pods.slice(i, i + PODS_PER_CHUNK) });
  };
}
