// StreamContainers: ListContainers' answer in chunks (cri-api 1.35+).
import { listContainers } from '../../pod/lists.js';
import { containerSummary } from '../cri-views.js';
import type { Edge } from '../edge.js';
import { streamedList } from '../list-streams.js';
import type { RuntimeRpc } from '../service.js';

export function StreamContainers(edge: Edge): RuntimeRpc<'StreamContainers'> {
  return streamedList('containers', async (request) => (await listContainers(edge.pods, request.filter)).map(containerSummary));
}
