// ListPodSandbox: kubelet's relist of sandboxes, each item's encoding made once per state.
import { listSandboxes } from '../../pod/lists.js';
import { sandboxSummary } from '../cri-views.js';
import type { Edge } from '../edge.js';
import { listedSummaries } from '../list-encoding.js';
import type { RuntimeRpc } from '../service.js';

export function ListPodSandbox(edge: Edge): RuntimeRpc<'ListPodSandbox'> {
  // Only a sandbox's state changes what ListPodSandbox says of it.
  const summaries = listedSummaries(edge.pods.tables.sandboxes, sandboxSummary, (r) => r.state, edge.lists.sandboxes);
  return async (request) => ({ items: (await listSandboxes(edge.pods, request.filter)).map((r) => summaries.get(r)) });
}
