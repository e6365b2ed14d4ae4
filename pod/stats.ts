// ContainerStats, ListContainerStats, PodSandboxStats, ListPodSandboxStats: cgroup samples of
// running containers (cpu, memory) and the size of their writable layers.
import { nanosFromMillis } from '../core/time.js';
import type { ContainerStats } from '../gen/runtime/v1/ContainerStats.js';
import type { ContainerStatsFilter__Output } from '../gen/runtime/v1/ContainerStatsFilter.js';
import type { PodSandboxStats } from '../gen/runtime/v1/PodSandboxStats.js';
import type { PodSandboxStatsFilter__Output } from '../gen/runtime/v1/PodSandboxStatsFilter.js';
import { nanoCores, readStatsForPid, type CgroupStats } from '../oci/runtime/stats.js';
import { diskUsage } from '../oci/runtime/usage.js';
import { refreshContainer } from './container-refresh.js';
import type { PodContext } from './context.js';
import { matchesLabels } from './filters.js';
import type { ContainerRecord, SandboxRecord } from './records.js';

const value = (n: number) => ({ value: String(Math.max(0, Math.round(n))) });
const nanos = (d: Date) => nanosFromMillis(d.getTime());

/** The CPU rate needs two samples: the last one of each container is kept here. */
const previous = new Map<string, Pick<CgroupStats, 'timestamp' | 'cpuUsageNs'>>();

/** Drops the samples of containers and sandboxes that no longer exist (the list calls kubelet makes run it). */
function forgetRemoved(ctx: PodContext): void {
  for (const id of previous.keys()) {
    if (!ctx.tables.containers.get(id) && !ctx.tables.sandboxes.get(id)) previous.delete(id);
  }
}

async function sample(id: string, pid: number | undefined): Promise<CgroupStats | undefined> {
  if (!pid) return undefined;
  const stats = await readStatsForPid(pid).catch(() => undefined);
  if (!stats) return undefined;
  const last = previous.get(id);
  previous.set(id, { timestamp: stats.timestamp, cpuUsageNs: stats.cpuUsageNs });
  return Object.assign(stats, { nanoCores: last ? nanoCores(last, stats) : undefined });
}

function cpuAndMemory(stats: (CgroupStats & { nanoCores?: number }) | undefined) {
  if (!stats) return { cpu: null, memory: null };
  const timestamp = nanos(stats.timestamp);
  return {
    cpu: { timestamp, usage_core_nano_seconds: value(stats.cpuUsageNs), usage_nano_cores: stats.nanoCores === undefined ? null : value(stats.nanoCores) },
    memory: {
      timestamp, working_set_bytes: value(stats.workingSetBytes), usage_bytes: value(stats.memoryUsageBytes),
      available_bytes: stats.availableBytes === undefined ? null : value(stats.availableBytes),
      rss_bytes: value(stats.rssBytes), page_faults: value(stats.pageFaults), major_page_faults: value(stats.majorPageFaults),
    },
  };
}

async function containerStats(ctx: PodContext, record: ContainerRecord): Promise<ContainerStats> {
  const fresh = await refreshContainer(ctx, record);
  const running = fresh.state === 'CONTAINER_RUNNING';
  const stats = running ? await sample(fresh.id, fresh.pid) : undefined;
  const layer = fresh.rootfsUpper ? await diskUsage(fresh.rootfsUpper) : undefined;
  return {
    attributes: { id: fresh.id, metadata: fresh.config.metadata, labels: fresh.config.labels, annotations: fresh.config.annotations },
    ...cpuAndMemory(stats),
    writable_layer: layer ? {
      timestamp: nanos(new Date()), fs_id: { mountpoint: ctx.settings.root_dir }, used_bytes: value(layer.bytes), inodes_used: value(layer.inodes),
    } : null,
  };
}

async function sandboxStats(ctx: PodContext, sandbox: SandboxRecord): Promise<PodSandboxStats> {
  const containers = ctx.tables.containers.list().filter((c) => c.sandboxId === sandbox.id);
  const [pause, ...stats] = await Promise.all([
    sandbox.state === 'SANDBOX_READY' ? sample(sandbox.id, sandbox.pausePid) : undefined,
    ...containers.map((c) => containerStats(ctx, c)),
  ]);
  // The pod's usage is its pause plus its containers (their cgroups are siblings under the parent).
  const sum = (pick: (s: ContainerStats) => { value?: unknown } | null | undefined, own: number) =>
    value(stats.reduce((total, s) => total + Number(pick(s)?.value ?? 0), own));
  const timestamp = nanos(new Date());
  return {
    attributes: { id: sandbox.id, metadata: sandbox.config.metadata, labels: sandbox.config.labels, annotations: sandbox.config.annotations },
    linux: {
      cpu: { timestamp, usage_core_nano_seconds: sum((s) => s.cpu?.usage_core_nano_seconds, pause?.cpuUsageNs ?? 0), usage_nano_cores: sum((s) => s.cpu?.usage_nano_cores, 0) },
      memory: { timestamp, working_set_bytes: sum((s) => s.memory?.working_set_bytes, pause?.workingSetBytes ?? 0), usage_bytes: sum((s) => s.memory?.usage_bytes, pause?.memoryUsageBytes ?? 0) },
      containers: stats,
    },
  };
}

export function statsOfContainer(ctx: PodContext, idOrPrefix: string): Promise<ContainerStats> {
  return containerStats(ctx, ctx.tables.containers.find(idOrPrefix));
}

export function listContainerStats(ctx: PodContext, f: ContainerStatsFilter__Output | null | undefined): Promise<ContainerStats[]> {
  forgetRemoved(ctx);
  const records = ctx.tables.containers.list().filter((r) =>
    (!f?.id || r.id.startsWith(f.id)) && (!f?.pod_sandbox_id || r.sandboxId.startsWith(f.pod_sandbox_id)) && matchesLabels(r.config.labels, f?.label_selector));
  return Promise.all(records.map((r) => containerStats(ctx, r)));
}

export function statsOfSandbox(ctx: PodContext, idOrPrefix: string): Promise<PodSandboxStats> {
  return sandboxStats(ctx, ctx.tables.sandboxes.find(idOrPrefix));
}

export function listSandboxStats(ctx: PodContext, f: PodSandboxStatsFilter__Output | null | undefined): Promise<PodSandboxStats[]> {
  forgetRemoved(ctx);
  const records = ctx.tables.sandboxes.list().filter((r) => (!f?.id || r.id.startsWith(f.id)) && matchesLabels(r.config.labels, f?.label_selector));
  return Promise.all(records.map((r) => sandboxStats(ctx, r)));
}
