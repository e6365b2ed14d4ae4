// StreamPodSandboxes: ListPodSandbox's answer in chunks (cri-api 1.35+).
import { listSandboxes } from '../../pod/lists.js';
import { sandboxSummary } from '../cri-views.js';
import type { Edge } from '../edge.js';
import { streamedList } from '../list-streams.js';
import type { RuntimeRpc } from '../service.js';

export function StreamPodSandboxes(edge: Edge): RuntimeRpc<'StreamPodSandboxes'> {
  return streamedList('pod_sandboxes', async (request) => (await listSandboxes(edge.pods, request.filter)).map(sandboxSummary));
}
