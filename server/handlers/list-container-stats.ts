// ListContainerStats: the stats of every container the filter selects (pod/stats.ts).
import { listContainerStats } from '../../pod/stats.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function ListContainerStats(edge: Edge): RuntimeRpc<'ListContainerStats'> {
  return async (request) => ({ stats: await listContainerStats(edge.pods, request.filter) });
}
