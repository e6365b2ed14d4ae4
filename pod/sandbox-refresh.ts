// What several sandbox RPCs share: the CNI view of a sandbox and its CRI status shape.
import type { PodSandboxStatus } from '../gen/runtime/v1/PodSandboxStatus.js';
import type { PodNetworkRequest } from '../cni/manager.js';
import { podNamespaceModes } from '../oci/runtime/spec/common.js';
import type { Deps } from './context.js';
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

/** Whether a record says READY while the pause may have an exit file (the watcher knows without a read). */
export function pauseMayHaveExited(deps: Deps, r: SandboxRecord): boolean {
  return r.state === 'SANDBOX_READY' && deps.runtimes.get(r.runtimeHandler)?.exits.mayHaveExited(r.id) === true;
}

/**
 * A ready sandbox whose pause has exited (OOM-killed, killed by hand) is NOTREADY, so kubelet makes a
 * new one; found through the pause's exit file, which the exit watcher sees without a read.
 */
export async function refreshSandbox(deps: Deps, r: SandboxRecord): Promise<SandboxRecord> {
  if (!pauseMayHaveExited(deps, r)) return r;
  if (!(await deps.runtimes.get(r.runtimeHandler)!.exitStatus(r.id)) || !deps.tables.sandboxes.get(r.id)) return r;
  deps.log.warn({ sandboxId: r.id }, 'the pause container exited: sandbox is NOTREADY');
  return deps.tables.sandboxes.update(r.id, (s) => { s.state = 'SANDBOX_NOTREADY'; });
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
