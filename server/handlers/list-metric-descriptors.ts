// ListMetricDescriptors: the cAdvisor metric families ListPodSandboxMetrics may return (pod/metrics.ts).
import { metricDescriptors } from '../../pod/metrics.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function ListMetricDescriptors(_edge: Edge): RuntimeRpc<'ListMetricDescriptors'> {
  const descriptors = metricDescriptors();
  return () => ({ descriptors });
}
