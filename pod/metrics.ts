// ListMetricDescriptors and ListPodSandboxMetrics: the cAdvisor metric families kubelet serves on
// /metrics/cadvisor when it takes its stats from the runtime (PodAndContainerStatsFromCRI). kubelet passes
// them through by name, so names, label keys and counter/gauge types are cAdvisor's (as containerd and CRI-O
// report them). Every metric carries the labels "id" and "name" (the container's, or for the pod's network
// the sandbox's id and the pod's name), then its own. Values are unsigned integers: "_seconds" counters
// are whole seconds, as the CRI's uint64 value allows. Built from the same samples as the stats (stats.ts).
import type { Metric } from '../gen/runtime/v1/Metric.js';
import type { MetricDescriptor } from '../gen/runtime/v1/MetricDescriptor.js';
import type { PodSandboxMetrics } from '../gen/runtime/v1/PodSandboxMetrics.js';
import type { DeviceIo, InterfaceCounters, Psi } from '../oci/runtime/cgroup-stats.js';
import { nanosFromMillis } from '../core/time.js';
import type { PodContext } from './context.js';
import { sampleAllSandboxes, type ContainerSample, type Sample, type SandboxSample } from './stats.js';

type MetricType = 'COUNTER' | 'GAUGE';

/** One value of a family: the values of its own label keys (after id and name), and the number. */
interface Point {
  labels: string[];
  value: number | undefined;
}

interface Family<S> {
  name: string;
  help: string;
  /** Label keys after "id" and "name". */
  labels: string[];
  type: MetricType;
  points(s: S): Point[];
}

const BASE_LABELS = ['id', 'name'];
const one = (value: number | undefined): Point[] => [{ labels: [], value }];
const seconds = (ns: number | undefined) => (ns === undefined ? undefined : Math.floor(ns / 1e9));
/** A running container with its sample, the only kind that has metrics. */
type Running = ContainerSample & { cgroup: Sample };

const cgroupFamily = (name: string, type: MetricType, help: string, pick: (c: Sample) => number | undefined): Family<Running> =>
  ({ name, help, labels: [], type, points: (s) => one(pick(s.cgroup)) });

const ioFamily = (name: string, help: string, pick: (d: DeviceIo) => number): Family<Running> => ({
  name, help, labels: ['device'], type: 'COUNTER',
  points: (s) => s.cgroup.detail.io.map((d) => ({ labels: [d.device ?? `${d.major}:${d.minor}`], value: pick(d) })),
});

/** cAdvisor's pressure families: "waiting" is PSI's "some" line, "stalled" its "full" one (cgroup v2 only). */
const pressureFamilies = (resource: 'cpu' | 'memory' | 'io'): Family<Running>[] =>
  ([['waiting', 'some'], ['stalled', 'full']] as const).map(([word, line]) => ({
    name: `container_pressure_${resource}_${word}_seconds_total`,
    help: `Total time duration ${word === 'waiting' ? 'tasks in the container have waited' : 'no tasks in the container made progress'} ` +
      `due to ${resource} congestion.`,
    labels: [], type: 'COUNTER',
    points: (s) => { const psi: Psi | undefined = s.cgroup.detail.psi[resource]; return psi ? one(seconds(psi[line]?.totalNs)) : []; },
  }));

const specFamily = (
  name: string,
  help: string,
  pick: (r: NonNullable<NonNullable<Running['record']['config']['linux']>['resources']>) => string | number,
): Family<Running> => ({
  name, help, labels: [], type: 'GAUGE',
  points: (s) => {
    const r = s.record.config.linux?.resources;
    const v = r ? Number(pick(r)) : 0;
    return v > 0 ? one(v) : [];
  },
});

const CONTAINER_FAMILIES: Family<Running>[] = [
  cgroupFamily('container_cpu_usage_seconds_total', 'COUNTER', 'Cumulative CPU time consumed in seconds.', (c) => seconds(c.cpuUsageNs)),
  cgroupFamily('container_cpu_user_seconds_total', 'COUNTER', 'Cumulative user CPU time consumed in seconds.',
    (c) => seconds(c.detail.cpuUserNs)),
  cgroupFamily('container_cpu_system_seconds_total', 'COUNTER', 'Cumulative system CPU time consumed in seconds.',
    (c) => seconds(c.detail.cpuSystemNs)),
  cgroupFamily('container_cpu_cfs_periods_total', 'COUNTER', 'Number of elapsed enforcement period intervals.', (c) => c.detail.cfsPeriods),
  cgroupFamily('container_cpu_cfs_throttled_periods_total', 'COUNTER', 'Number of throttled period intervals.',
    (c) => c.detail.cfsThrottledPeriods),
  cgroupFamily('container_cpu_cfs_throttled_seconds_total', 'COUNTER', 'Total time duration the container has been throttled.',
    (c) => seconds(c.detail.cfsThrottledNs)),
  cgroupFamily('container_memory_usage_bytes', 'GAUGE',
    'Current memory usage in bytes, including all memory regardless of when it was accessed.', (c) => c.memoryUsageBytes),
  cgroupFamily('container_memory_working_set_bytes', 'GAUGE', 'Current working set in bytes.', (c) => c.workingSetBytes),
  cgroupFamily('container_memory_rss', 'GAUGE', 'Size of RSS in bytes.', (c) => c.rssBytes),
  cgroupFamily('container_memory_cache', 'GAUGE', 'Number of bytes of page cache memory.', (c) => c.detail.cacheBytes),
  cgroupFamily('container_memory_mapped_file', 'GAUGE', 'Size of memory mapped files in bytes.', (c) => c.detail.mappedFileBytes),
  cgroupFamily('container_memory_swap', 'GAUGE', 'Container swap usage in bytes.', (c) => c.detail.swapUsageBytes),
  cgroupFamily('container_memory_max_usage_bytes', 'GAUGE', 'Maximum memory usage recorded in bytes.', (c) => c.detail.maxUsageBytes),
  cgroupFamily('container_memory_failcnt', 'COUNTER', 'Number of memory usage hits limits.', (c) => c.detail.failcnt),
  cgroupFamily('container_memory_total_active_file_bytes', 'GAUGE', 'Current total active file in bytes.', (c) => c.detail.activeFileBytes),
  cgroupFamily('container_memory_total_inactive_file_bytes', 'GAUGE', 'Current total inactive file in bytes.',
    (c) => c.detail.inactiveFileBytes),
  {
    name: 'container_memory_failures_total', help: 'Cumulative count of memory allocation failures.',
    labels: ['failure_type', 'scope'], type: 'COUNTER',
    points: (s) => [
      { labels: ['pgfault', 'container'], value: s.cgroup.pageFaults },
      { labels: ['pgmajfault', 'container'], value: s.cgroup.majorPageFaults },
    ],
  },
  cgroupFamily('container_oom_events_total', 'COUNTER', 'Count of out of memory events observed for the container.',
    (c) => c.detail.oomKills),
  {
    name: 'container_fs_usage_bytes', help: 'Number of bytes that are consumed by the container on this filesystem.',
    labels: ['device'], type: 'GAUGE',
    points: (s) => (s.layer ? [{ labels: [s.layer.mountpoint], value: s.layer.bytes }] : []),
  },
  ioFamily('container_fs_reads_bytes_total', 'Cumulative count of bytes read.', (d) => d.readBytes),
  ioFamily('container_fs_writes_bytes_total', 'Cumulative count of bytes written.', (d) => d.writeBytes),
  ioFamily('container_fs_reads_total', 'Cumulative count of reads completed.', (d) => d.reads),
  ioFamily('container_fs_writes_total', 'Cumulative count of writes completed.', (d) => d.writes),
  {
    name: 'container_blkio_device_usage_total', help: 'Blkio device bytes usage.',
    labels: ['device', 'major', 'minor', 'operation'], type: 'COUNTER',
    points: (s) => s.cgroup.detail.io.flatMap((d) => (['Read', 'Write'] as const).map((op) => ({
      labels: [d.device ?? `${d.major}:${d.minor}`, String(d.major), String(d.minor), op],
      value: op === 'Read' ? d.readBytes : d.writeBytes,
    }))),
  },
  ...pressureFamilies('cpu'),
  ...pressureFamilies('memory'),
  ...pressureFamilies('io'),
  cgroupFamily('container_processes', 'GAUGE', 'Number of processes running inside the container.', (c) => c.detail.processes),
  cgroupFamily('container_threads', 'GAUGE', 'Number of threads running inside the container.', (c) => c.detail.threads),
  {
    name: 'container_start_time_seconds', help: 'Start time of the container since unix epoch in seconds.', labels: [], type: 'GAUGE',
    points: (s) => one(Math.floor(Number(s.record.startedAt) / 1e9)),
  },
  {
    name: 'container_last_seen', help: 'Last time a container was seen by the exporter.', labels: [], type: 'GAUGE',
    points: (s) => one(Math.floor(s.cgroup.timestamp.getTime() / 1000)),
  },
  specFamily('container_spec_cpu_period', 'CPU period of the container.', (r) => r.cpu_period),
  specFamily('container_spec_cpu_quota', 'CPU quota of the container.', (r) => r.cpu_quota),
  specFamily('container_spec_cpu_shares', 'CPU share of the container.', (r) => r.cpu_shares),
  specFamily('container_spec_memory_limit_bytes', 'Memory limit for the container.', (r) => r.memory_limit_in_bytes),
];

const netFamily = (name: string, help: string, pick: (i: InterfaceCounters) => number): Family<InterfaceCounters> =>
  ({ name, help, labels: ['interface'], type: 'COUNTER', points: (i) => [{ labels: [i.name], value: pick(i) }] });

/** Per interface of the pod's network namespace, lo excepted: secondary networks (net1, ...) too. */
const NETWORK_FAMILIES: Family<InterfaceCounters>[] = [
  netFamily('container_network_receive_bytes_total', 'Cumulative count of bytes received.', (i) => i.rxBytes),
  netFamily('container_network_receive_packets_total', 'Cumulative count of packets received.', (i) => i.rxPackets),
  netFamily('container_network_receive_packets_dropped_total', 'Cumulative count of packets dropped while receiving.', (i) => i.rxDropped),
  netFamily('container_network_receive_errors_total', 'Cumulative count of errors encountered while receiving.', (i) => i.rxErrors),
  netFamily('container_network_transmit_bytes_total', 'Cumulative count of bytes transmitted.', (i) => i.txBytes),
  netFamily('container_network_transmit_packets_total', 'Cumulative count of packets transmitted.', (i) => i.txPackets),
  netFamily('container_network_transmit_packets_dropped_total', 'Cumulative count of packets dropped while transmitting.',
    (i) => i.txDropped),
  netFamily('container_network_transmit_errors_total', 'Cumulative count of errors encountered while transmitting.', (i) => i.txErrors),
];

/** Every family ListPodSandboxMetrics may return; fixed for the process lifetime. */
export function metricDescriptors(): MetricDescriptor[] {
  return [...CONTAINER_FAMILIES, ...NETWORK_FAMILIES].map((f) => ({
    name: f.name, help: f.help, label_keys: [...BASE_LABELS, ...f.labels],
  }));
}

function metricsOf<S>(families: Family<S>[], subject: S, base: string[], at: Date): Metric[] {
  const timestamp = nanosFromMillis(at.getTime());
  return families.flatMap((f) => f.points(subject)
    .filter((p): p is Point & { value: number } => p.value !== undefined && Number.isFinite(p.value))
    .map((p) => ({
      name: f.name, timestamp, metric_type: f.type, label_values: [...base, ...p.labels],
      value: { value: String(Math.max(0, Math.round(p.value))) },
    })));
}

/** One pod's metrics: its network on the pod, cgroup families on each running container. */
export function sandboxMetrics(s: SandboxSample): PodSandboxMetrics {
  const network = s.network;
  return {
    pod_sandbox_id: s.record.id,
    metrics: network
      ? network.interfaces.flatMap((i) => metricsOf(NETWORK_FAMILIES, i, [s.record.id, s.record.config.metadata.name], network.timestamp))
      : [],
    container_metrics: s.containers.filter((c): c is Running => c.cgroup !== undefined).map((c) => ({
      container_id: c.record.id,
      metrics: metricsOf(CONTAINER_FAMILIES, c, [c.record.id, c.record.config.metadata.name], c.cgroup.timestamp),
    })),
  };
}

/** The metrics of every pod, sampled now. */
export async function listSandboxMetrics(ctx: PodContext): Promise<PodSandboxMetrics[]> {
  return (await sampleAllSandboxes(ctx)).map(sandboxMetrics);
}
