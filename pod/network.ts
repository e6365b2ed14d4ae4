// A sandbox as the pod network sees it, and network teardown that cannot be forgotten: a CNI DEL that
// fails (a broken plugin, a timeout) would leak the pod's IP forever if nobody asked again, so a failed
// teardown is written to the store and retried in the background with backoff (pending.ts), across
// restarts, until it succeeds. Status (verbose) lists what is pending.
import type { PodNetworkRequest } from '../cni/manager.js';
import type { PodContext } from './context.js';
import type { SandboxRecord } from './records.js';

const PROTOCOLS = { TCP: 'tcp', UDP: 'udp', SCTP: 'sctp' } as const;

const FIRST_RETRY_MS = 1000;
const MAX_RETRY_MS = 5 * 60_000;

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
      .map((p) => ({
        protocol: PROTOCOLS[p.protocol as keyof typeof PROTOCOLS] ?? 'tcp',
        containerPort: p.container_port,
        hostPort: p.host_port,
        hostIp: p.host_ip,
      })),
    annotations: r.config.annotations,
    cgroupParent: r.config.linux?.cgroup_parent || undefined,
  };
}

/** How long to wait before the next try of something that failed `attempts` times. */
export function backoff(attempts: number): number {
  return Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** Math.max(0, attempts - 1));
}

/** Records a failed teardown for the background retry. */
export function deferTeardown(ctx: PodContext, request: PodNetworkRequest, err: unknown): void {
  const previous = ctx.tables.teardowns.get(request.sandboxId);
  const attempts = (previous?.attempts ?? 0) + 1;
  ctx.tables.teardowns.put({
    id: request.sandboxId, request, attempts, lastError: (err as Error).message, nextAt: Date.now() + backoff(attempts),
  });
}

/** Detaches a sandbox from the pod network; a failure is deferred for retry and rethrown. */
export async function tearDownNetwork(ctx: PodContext, sandbox: SandboxRecord): Promise<void> {
  const request = podNetworkRequest(sandbox);
  try {
    await ctx.network.tearDownPod(request);
  } catch (err) {
    deferTeardown(ctx, request, err);
    throw err;
  }
  ctx.tables.teardowns.delete(sandbox.id);
}
