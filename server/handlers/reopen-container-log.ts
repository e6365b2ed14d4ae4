// ReopenContainerLog: conmon reopens the log file after kubelet rotated it (pod/container-update.ts).
import { reopenContainerLog } from '../../pod/container-update.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function ReopenContainerLog(edge: Edge): RuntimeRpc<'ReopenContainerLog'> {
  return async (request) => {
    await reopenContainerLog(edge.pods, request.container_id);
    return {};
  };
}
