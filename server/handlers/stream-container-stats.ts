// StreamContainerStats: ListContainerStats' answer in chunks (cri-api 1.35+).
import type { Edge } from '../edge.js';
import { streamedList } from '../list-streams.js';
import type { RuntimeRpc } from '../service.js';
import { ListContainerStats } from './list-container-stats.js';

export function StreamContainerStats(edge: Edge): RuntimeRpc<'StreamContainerStats'> {
  const list = ListContainerStats(edge);
  return streamedList('container_stats', async (request, ctx) => (await list(request, ctx)).stats ?? []);
}
