// What several sandbox RPCs share: the CNI view of a sandbox and its CRI status shape.
import type { PodSandboxStatus } from '../gen/runtime/v1/PodSandboxStatus.js';
import type { PodNetworkRequest } from '../cni/manager.js';
import { podNamespaceModes } from '../oci/runtime/spec/common.js';
import type { SandboxRecord } from './records.js';

export { podNamespaceModes };

const PROTOCOLS = { TCP: 'tcp', UDP: 'udp', SCTP: 'sctp' } as const;

export function podNetworkRequest(r: SandboxRecord): PodNetworkRequest {
  const m = r.config.metadata;
  return {
    sandboxId: r.id,
    name: m.name,
    namespace: m.namespace,
    uid: m.uid,
    netnsPath: r.netns?.path ?? '',
    portMappings: r.config.port_mappings
      .filter((p) => p.host_port > 0)
      .map((p) => ({ protocol: PROTOCOLS[p.protocol as keyof typeof PROTOCOLS] ?? 'tcp', containerPort: p.container_port, hostPort: p.host_port, hostIp: p.host_ip })),
    annotations: r.config.annotations,
    cgroupParent: r.config.linux?.cgroup_parent || undefined,
  };
}

export function sandboxStatus(r: SandboxRecord): PodSandboxStatus {
  const [ip = '', ...additional] = r.ips;
  return {
    id: r.id,
    metadata: r.config.metadata,
    state: r.state,
    created_at: r.createdAt,
    network: { ip, additional_ips: additional.map((a) => ({ ip: a })) },
    linux: { namespaces: { options: r.config.linux?.security_context?.namespace_options ?? {} } },
    labels: r.config.labels,
    annotations: r.config.annotations,
    runtime_handler: r.runtimeHandler,
  };
}
