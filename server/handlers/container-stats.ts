// ContainerStats: one container's cgroup sample and writable layer (pod/stats.ts).
import { statsOfContainer } from '../../pod/stats.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function ContainerStats(edge: Edge): RuntimeRpc<'ContainerStats'> {
  return async (request) => ({ stats: await statsOfContainer(edge.pods, request.container_id) });
}
