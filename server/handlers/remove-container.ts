// RemoveContainer: stopped, runc state, rootfs, directory and record removed; idempotent (pod/container-remove.ts).
import { removeContainer } from '../../pod/container-remove.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function RemoveContainer(edge: Edge): RuntimeRpc<'RemoveContainer'> {
  return async (request, call) => {
    await removeContainer(edge.pods, request.container_id, call.log);
    return {};
  };
}
