// StreamPodSandboxMetrics: ListPodSandboxMetrics in chunks, so a large node's answer need not fit one message.
import { listSandboxMetrics } from '../../pod/metrics.js';
import type { Edge } from '../edge.js';
import { streamedList } from '../list-streams.js';
import type { RuntimeRpc } from '../service.js';

/** Pods per message: a pod with a few containers is some tens of kilobytes of metrics. */
const PODS_PER_MESSAGE = 20;

export function StreamPodSandboxMetrics(edge: Edge): RuntimeRpc<'StreamPodSandboxMetrics'> {
  return streamedList('pod_sandbox_metrics', () => listSandboxMetrics(edge.pods), PODS_PER_MESSAGE);
}
