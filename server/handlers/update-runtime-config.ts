// UpdateRuntimeConfig: the pod CIDR kubelet hands us.
import { setPodCidr } from '../../pod/runtime-status.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function UpdateRuntimeConfig(edge: Edge): RuntimeRpc<'UpdateRuntimeConfig'> {
  return (request) => {
    setPodCidr(edge.pods, edge.meta, request.runtime_config?.network_config?.pod_cidr ?? '');
    return {};
  };
}
