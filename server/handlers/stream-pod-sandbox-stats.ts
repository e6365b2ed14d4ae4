// StreamPodSandboxStats: ListPodSandboxStats' answer in chunks (cri-api 1.35+).
import type { Edge } from '../edge.js';
import { streamedList } from '../list-streams.js';
import type { RuntimeRpc } from '../service.js';
import { ListPodSandboxStats } from './list-pod-sandbox-stats.js';

export function StreamPodSandboxStats(edge: Edge): RuntimeRpc<'StreamPodSandboxStats'> {
  const list = ListPodSandboxStats(edge);
  return streamedList('pod_sandbox_stats', async (request, ctx) => (await list(request, ctx)).stats ?? []);
}
