// ContainerStats, ListContainerStats, PodSandboxStats, ListPodSandboxStats: cgroup samples of running
// containers (cpu, memory, swap, and on cgroup v2 pressure), the size of their writable layers, and a pod's
// interface counters, process count and, on cgroup v2, its own cgroup's pressure. The samples are also what
// the CRI metrics (metrics.ts) are made of.
import { NotFound } from '../core/errors.js';
import { nanosFromMillis } from '../core/time.js';
import type { ContainerStats } from '../gen/runtime/v1/ContainerStats.js';
import type { ContainerStatsFilter__Output } from '../gen/runtime/v1/ContainerStatsFilter.js';
import type { PodSandboxStats } from '../gen/runtime/v1/PodSandboxStats.js';
import type { PodSandboxStatsFilter__Output } from '../gen/runtime/v1/PodSandboxStatsFilter.js';
import type { PsiStats } from '../gen/runtime/v1/PsiStats.js';
import { storageDirs } from '../oci/image/storage-dirs.js';
import {
  readFullStatsForPid, readInterfaceCounters, readPodCgroupPressure, type CgroupDetail, type InterfaceCounters, type Psi,
} from '../oci/runtime/cgroup-stats.js';
import { podCgroupParentDir } from '../oci/runtime/cgroups.js';
import { nanoCores, type CgroupStats } from '../oci/runtime/stats.js';
import { writableLayerUsage } from '../oci/image/usage.js';
import { refreshContainer } from './container-refresh.js';
import { refreshSandbox } from './sandbox-refresh.js';
import type { PodContext } from './context.js';
import { matchesLabels } from './filters.js';
import type { ContainerRecord, SandboxRecord } from './records.js';

/** One cgroup sample with its CPU rate (undefined on the first sample of a cgroup). */
export type Sample = CgroupStats & { detail: CgroupDetail; nanoCores: number | undefined };

export interface ContainerSample {
  /** The record as it was refreshed for this sample. */
  record: ContainerRecord;
  /** Undefined unless the container runs (and its cgroup could be read). */
  cgroup: Sample | undefined;
  /** The writable layer's use; `mountpoint` names its filesystem as ImageFsInfo does. */
  layer: { timestamp: Date; bytes: number; inodes: number; mountpoint: string } | undefined;
}

/** Pressure stall information per resource (cgroup v2). */
type Pressure = CgroupDetail['psi'];

export interface SandboxSample {
  record: SandboxRecord;
  pause: Sample | undefined;
  /** The pod network namespace's interfaces (lo excepted); undefined for a host-network or stopped pod. */
  network: { timestamp: Date; interfaces: InterfaceCounters[] } | undefined;
  containers: ContainerSample[];
  /** The pod cgroup's pressure: cgroup v2 and a pod cgroup of its own (kubelet's cgroup_parent) only. */
  podPressure?: Pressure | undefined;
}

/** The interface CNI gives the pod's default network; every other one is reported beside it. */
const DEFAULT_INTERFACE = 'eth0';

const value = (n: number) => ({ value: String(Math.max(0, Math.round(n))) });
const optional = (n: number | undefined) => (n === undefined ? null : value(n));
const nanos = (d: Date) => nanosFromMillis(d.getTime());

/** The CPU rate needs two samples: the last one of each container is kept here. */
const previous = new Map<string, Pick<CgroupStats, 'timestamp' | 'cpuUsageNs'>>();

/** Drops the samples of containers and sandboxes that no longer exist (the list calls kubelet makes run it). */
function forgetRemoved(ctx: PodContext): void {
  for (const id of previous.keys()) {
    if (!ctx.tables.containers.get(id) && !ctx.tables.sandboxes.get(id)) previous.delete(id);
  }
}

/** A cgroup sample of the process `pid`, or undefined when it is gone (the container exited meanwhile). */
async function sample(id: string, pid: number | undefined): Promise<Sample | undefined> {
  if (!pid) return undefined;
  const stats = await readFullStatsForPid(pid).catch((err: unknown) => { if (err instanceof NotFound) return undefined; throw err; });
  if (!stats) return undefined;
  const last = previous.get(id);
  previous.set(id, { timestamp: stats.timestamp, cpuUsageNs: stats.cpuUsageNs });
  return { ...stats, nanoCores: last ? nanoCores(last, stats) : undefined };
}

/** Runs `read` for each item; an item whose record went away meanwhile (NotFound) is left out. */
async function eachPresent<T, R>(items: T[], read: (item: T) => Promise<R>): Promise<R[]> {
  const settled = await Promise.all(items.map((item) => read(item).catch((err: unknown) => {
    if (err instanceof NotFound) return undefined;
    throw err;
  })));
  return settled.filter((r): r is Awaited<R> => r !== undefined);
}

const maxAgeMs = (ctx: PodContext) => (ctx.settings.writable_layer_usage_max_age_seconds ?? 10) * 1000;

async function sampleContainer(ctx: PodContext, record: ContainerRecord): Promise<ContainerSample> {
  const fresh = await refreshContainer(ctx, record);
  const [cgroup, layer] = await Promise.all([
    fresh.state === 'CONTAINER_RUNNING' ? sample(fresh.id, fresh.pid) : undefined,
    // Cached, up to 10 s old: a layer of millions of files is not walked whole on every call.
    fresh.rootfsUpper ? writableLayerUsage.get(fresh.rootfsUpper, maxAgeMs(ctx)) : undefined,
  ]);
  return { record: fresh, cgroup, layer: layer && { ...layer, mountpoint: storageDirs(ctx.settings).writableLayers } };
}

async function podNetwork(sandbox: SandboxRecord): Promise<SandboxSample['network']> {
  if (!sandbox.netns || !sandbox.pausePid || sandbox.state !== 'SANDBOX_READY') return undefined;
  // The pause lives in the pod's network namespace: its /proc view of net/dev is the pod's.
  const interfaces = await readInterfaceCounters(sandbox.pausePid).catch((err: unknown) => {
    if (err instanceof NotFound) return undefined;
    throw err;
  });
  return interfaces && { timestamp: new Date(), interfaces };
}

/**
 * The pod cgroup's pressure. Without a cgroup_parent the pod's cgroups sit in minicri's shared default
 * parent, whose pressure is every such pod's together: none is reported then.
 */
async function podPressure(ctx: PodContext, sandbox: SandboxRecord): Promise<Pressure | undefined> {
  const parent = sandbox.config.linux?.cgroup_parent ?? '';
  if (parent === '' || sandbox.state !== 'SANDBOX_READY') return undefined;
  return readPodCgroupPressure(podCgroupParentDir(ctx.settings.cgroup_driver, parent));
}

async function sampleSandbox(ctx: PodContext, record: SandboxRecord): Promise<SandboxSample> {
  // A pause that died since the last read is recorded first: its pid may be another process's by now.
  const sandbox = await refreshSandbox(ctx, record);
  const records = ctx.tables.containers.list().filter((c) => c.sandboxId === sandbox.id);
  const [pause, network, containers, pressure] = await Promise.all([
    sandbox.state === 'SANDBOX_READY' ? sample(sandbox.id, sandbox.pausePid) : undefined,
    podNetwork(sandbox),
    eachPresent(records, (c) => sampleContainer(ctx, c)),
    podPressure(ctx, sandbox),
  ]);
  return { record: sandbox, pause, network, containers, podPressure: pressure };
}

function psiStats(psi: Psi | undefined): PsiStats | null {
  if (!psi) return null;
  const line = (l: Psi['some'] | undefined) =>
    l && { Total: String(Math.round(l.totalNs)), Avg10: l.avg10, Avg60: l.avg60, Avg300: l.avg300 };
  return { Some: line(psi.some), Full: line(psi.full) ?? null };
}

function containerStatsOf(s: ContainerSample): ContainerStats {
  const { record: r, cgroup: c, layer } = s;
  const timestamp = c && nanos(c.timestamp);
  return {
    attributes: { id: r.id, metadata: r.config.metadata, labels: r.config.labels, annotations: r.config.annotations },
    cpu: c ? {
      timestamp, usage_core_nano_seconds: value(c.cpuUsageNs), usage_nano_cores: optional(c.nanoCores), psi: psiStats(c.detail.psi.cpu),
    } : null,
    memory: c ? {
      timestamp, working_set_bytes: value(c.workingSetBytes), usage_bytes: value(c.memoryUsageBytes),
      available_bytes: optional(c.availableBytes),
      rss_bytes: value(c.rssBytes), page_faults: value(c.pageFaults), major_page_faults: value(c.majorPageFaults),
      psi: psiStats(c.detail.psi.memory),
    } : null,
    swap: c && c.detail.swapUsageBytes !== undefined
      ? { timestamp, swap_usage_bytes: value(c.detail.swapUsageBytes), swap_available_bytes: optional(c.detail.swapAvailableBytes) } : null,
    // The CRI's IoUsage carries pressure only (cgroup v2); the bytes per device are in the metrics.
    io: c?.detail.psi.io ? { timestamp, psi: psiStats(c.detail.psi.io) } : null,
    writable_layer: layer ? {
      timestamp: nanos(layer.timestamp), fs_id: { mountpoint: layer.mountpoint },
      used_bytes: value(layer.bytes), inodes_used: value(layer.inodes),
    } : null,
  };
}

/** Sums one number over the pause and the containers that have a sample. */
function podTotal(s: SandboxSample, pick: (c: Sample) => number | undefined): number {
  return [s.pause, ...s.containers.map((c) => c.cgroup)].reduce((total, c) => total + (c ? pick(c) ?? 0 : 0), 0);
}

function interfaceUsage(i: InterfaceCounters) {
  return {
    name: i.name, rx_bytes: value(i.rxBytes), rx_errors: value(i.rxErrors), tx_bytes: value(i.txBytes), tx_errors: value(i.txErrors),
  };
}

/** A pod's stats from its sample. Pure (exported for the tests). */
export function sandboxStatsOf(s: SandboxSample): PodSandboxStats {
  const r = s.record;
  const timestamp = nanos(new Date());
  const interfaces = s.network?.interfaces ?? [];
  const primary = interfaces.find((i) => i.name === DEFAULT_INTERFACE) ?? interfaces[0];
  const psi = s.podPressure;
  return {
    attributes: { id: r.id, metadata: r.config.metadata, labels: r.config.labels, annotations: r.config.annotations },
    linux: {
      // The pod's usage is its pause plus its containers (their cgroups are siblings under the parent);
      // pressure does not add up that way and comes from the pod cgroup itself.
      cpu: {
        timestamp,
        usage_core_nano_seconds: value(podTotal(s, (c) => c.cpuUsageNs)),
        usage_nano_cores: value(podTotal(s, (c) => c.nanoCores)),
        psi: psiStats(psi?.cpu),
      },
      memory: {
        timestamp,
        working_set_bytes: value(podTotal(s, (c) => c.workingSetBytes)),
        usage_bytes: value(podTotal(s, (c) => c.memoryUsageBytes)),
        rss_bytes: value(podTotal(s, (c) => c.rssBytes)),
        page_faults: value(podTotal(s, (c) => c.pageFaults)),
        major_page_faults: value(podTotal(s, (c) => c.majorPageFaults)),
        psi: psiStats(psi?.memory),
      },
      io: psi?.io ? { timestamp, psi: psiStats(psi.io) } : null,
      network: s.network ? {
        timestamp: nanos(s.network.timestamp),
        default_interface: primary ? interfaceUsage(primary) : null,
        interfaces: interfaces.filter((i) => i !== primary).map(interfaceUsage),
      } : null,
      process: { timestamp, process_count: value(podTotal(s, (c) => c.detail.processes)) },
      containers: s.containers.map(containerStatsOf),
    },
  };
}

export async function statsOfContainer(ctx: PodContext, idOrPrefix: string): Promise<ContainerStats> {
  return containerStatsOf(await sampleContainer(ctx, ctx.tables.containers.find(idOrPrefix)));
}

export async function listContainerStats(ctx: PodContext, f: ContainerStatsFilter__Output | null | undefined): Promise<ContainerStats[]> {
  forgetRemoved(ctx);
  const records = ctx.tables.containers.list().filter((r) =>
    (!f?.id || r.id.startsWith(f.id))
    && (!f?.pod_sandbox_id || r.sandboxId.startsWith(f.pod_sandbox_id))
    && matchesLabels(r.config.labels, f?.label_selector));
  return (await eachPresent(records, (r) => sampleContainer(ctx, r))).map(containerStatsOf);
}

export async function statsOfSandbox(ctx: PodContext, idOrPrefix: string): Promise<PodSandboxStats> {
  return sandboxStatsOf(await sampleSandbox(ctx, ctx.tables.sandboxes.find(idOrPrefix)));
}

export async function listSandboxStats(ctx: PodContext, f: PodSandboxStatsFilter__Output | null | undefined): Promise<PodSandboxStats[]> {
  forgetRemoved(ctx);
  const records = ctx.tables.sandboxes.list().filter((r) =>
    (!f?.id || r.id.startsWith(f.id)) && matchesLabels(r.config.labels, f?.label_selector));
  return (await eachPresent(records, (r) => sampleSandbox(ctx, r))).map(sandboxStatsOf);
}

/** Samples of every sandbox and its containers, for the metrics. */
export async function sampleAllSandboxes(ctx: PodContext): Promise<SandboxSample[]> {
  forgetRemoved(ctx);
  return eachPresent(ctx.tables.sandboxes.list(), (r) => sampleSandbox(ctx, r));
}
