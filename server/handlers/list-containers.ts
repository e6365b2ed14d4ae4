// ListContainers: kubelet's relist of containers, each item's encoding made once per state.
import { listContainers } from '../../pod/lists.js';
import { containerSummary } from '../cri-views.js';
import type { Edge } from '../edge.js';
import { listedSummaries } from '../list-encoding.js';
import type { RuntimeRpc } from '../service.js';

export function ListContainers(edge: Edge): RuntimeRpc<'ListContainers'> {
  // Only a container's state changes what ListContainers says of it.
  const summaries = listedSummaries(edge.pods.tables.containers, containerSummary, (r) => r.state, edge.lists.containers);
  return async (request) => ({ containers: (await listContainers(edge.pods, request.filter)).map((r) => summaries.get(r)) });
}
