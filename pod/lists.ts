// ListPodSandbox and ListContainers: records from memory, refreshed only when an exit may be waiting,
// so kubelet's relists every second cost no promise per record.
import type { ContainerFilter__Output } from '../gen/runtime/v1/ContainerFilter.js';
import type { PodSandboxFilter__Output } from '../gen/runtime/v1/PodSandboxFilter.js';
import { containerMayHaveExited, refreshContainer } from './container-refresh.js';
import type { PodContext } from './context.js';
import { matchesLabels } from './filters.js';
import type { ContainerRecord, SandboxRecord } from './records.js';
import { pauseMayHaveExited, refreshSandbox } from './sandbox-refresh.js';

export async function listSandboxes(ctx: PodContext, filter: PodSandboxFilter__Output | null | undefined): Promise<SandboxRecord[]> {
  const all = ctx.tables.sandboxes.list();
  const fresh = all.some((r) => pauseMayHaveExited(ctx, r)) ? await Promise.all(all.map((r) => refreshSandbox(ctx, r))) : all;
  return fresh.filter((r) =>
    (!filter?.id || r.id.startsWith(filter.id))
    && (!filter?.state || r.state === filter.state.state)
    && matchesLabels(r.config.labels, filter?.label_selector));
}

/** The containers of one sandbox, refreshed (PodSandboxStatus gives their statuses with the pod's). */
export async function sandboxContainers(ctx: PodContext, sandboxId: string): Promise<ContainerRecord[]> {
  const mine = ctx.tables.containers.list().filter((r) => r.sandboxId === sandboxId);
  return mine.some((r) => containerMayHaveExited(ctx, r)) ? Promise.all(mine.map((r) => refreshContainer(ctx, r))) : mine;
}

export async function listContainers(ctx: PodContext, filter: ContainerFilter__Output | null | undefined): Promise<ContainerRecord[]> {
  const candidates = ctx.tables.containers.list().filter((r) =>
    (!filter?.id || r.id.startsWith(filter.id))
    && (!filter?.pod_sandbox_id || r.sandboxId.startsWith(filter.pod_sandbox_id))
    && matchesLabels(r.config.labels, filter?.label_selector));
  const fresh = candidates.some((r) => containerMayHaveExited(ctx, r))
    ? await Promise.all(candidates.map((r) => refreshContainer(ctx, r)))
    : candidates;
  return fresh.filter((r) => !filter?.state || r.state === filter.state.state);
}
