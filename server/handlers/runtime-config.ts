// RuntimeConfig: the cgroup driver kubelet must match.
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function RuntimeConfig(edge: Edge): RuntimeRpc<'RuntimeConfig'> {
  const response = { linux: { cgroup_driver: edge.config.cgroup_driver === 'systemd' ? 'SYSTEMD' as const : 'CGROUPFS' as const } };
  return () => response;
}
