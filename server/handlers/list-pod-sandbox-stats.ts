// ListPodSandboxStats: the stats of every pod the filter selects (pod/stats.ts).
import { listSandboxStats } from '../../pod/stats.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function ListPodSandboxStats(edge: Edge): RuntimeRpc<'ListPodSandboxStats'> {
  return async (request) => ({ stats: await listSandboxStats(edge.pods, request.filter) });
}
