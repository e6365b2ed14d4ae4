// The cAdvisor metric families kubelet's /metrics/cadvisor carries, with their label keys, as a runtime serving
// ListMetricDescriptors must name them for kubelet's CRI metrics collector (PodAndContainerStatsFromCRI) to pass
// them through: cAdvisor's names, and the "id" and "name" labels the CRI runtimes put first (containerd 2.x's
// baseLabelKeys). The dashboards and metrics-server read these names; a rename or a changed label set breaks them.
export const KUBELET_CADVISOR_METRICS: Record<string, { labels: string[]; type: 'COUNTER' | 'GAUGE' }> = {
  container_cpu_usage_seconds_total: { labels: ['id', 'name'], type: 'COUNTER' },
  container_cpu_user_seconds_total: { labels: ['id', 'name'], type: 'COUNTER' },
  container_cpu_system_seconds_total: { labels: ['id', 'name'], type: 'COUNTER' },
  container_cpu_cfs_periods_total: { labels: ['id', 'name'], type: 'COUNTER' },
  container_cpu_cfs_throttled_periods_total: { labels: ['id', 'name'], type: 'COUNTER' },
  container_cpu_cfs_throttled_seconds_total: { labels: ['id', 'name'], type: 'COUNTER' },
  container_memory_usage_bytes: { labels: ['id', 'name'], type: 'GAUGE' },
  container_memory_working_set_bytes: { labels: ['id', 'name'], type: 'GAUGE' },
  container_memory_rss: { labels: ['id', 'name'], type: 'GAUGE' },
  container_memory_cache: { labels: ['id', 'name'], type: 'GAUGE' },
  container_memory_mapped_file: { labels: ['id', 'name'], type: 'GAUGE' },
  container_memory_swap: { labels: ['id', 'name'], type: 'GAUGE' },
  container_memory_total_active_file_bytes: { labels: ['id', 'name'], type: 'GAUGE' },
  container_memory_total_inactive_file_bytes: { labels: ['id', 'name'], type: 'GAUGE' },
  container_memory_max_usage_bytes: { labels: ['id', 'name'], type: 'GAUGE' },
  container_memory_failcnt: { labels: ['id', 'name'], type: 'COUNTER' },
  container_memory_failures_total: { labels: ['id', 'name', 'failure_type', 'scope'], type: 'COUNTER' },
  container_oom_events_total: { labels: ['id', 'name'], type: 'COUNTER' },
  container_fs_usage_bytes: { labels: ['id', 'name', 'device'], type: 'GAUGE' },
  container_fs_reads_bytes_total: { labels: ['id', 'name', 'device'], type: 'COUNTER' },
  container_fs_writes_bytes_total: { labels: ['id', 'name', 'device'], type: 'COUNTER' },
  container_fs_reads_total: { labels: ['id', 'name', 'device'], type: 'COUNTER' },
  container_fs_writes_total: { labels: ['id', 'name', 'device'], type: 'COUNTER' },
  container_blkio_device_usage_total: { labels: ['id', 'name', 'device', 'major', 'minor', 'operation'], type: 'COUNTER' },
  container_processes: { labels: ['id', 'name'], type: 'GAUGE' },
  container_threads: { labels: ['id', 'name'], type: 'GAUGE' },
  container_start_time_seconds: { labels: ['id', 'name'], type: 'GAUGE' },
  container_last_seen: { labels: ['id', 'name'], type: 'GAUGE' },
  container_spec_cpu_period: { labels: ['id', 'name'], type: 'GAUGE' },
  container_spec_cpu_quota: { labels: ['id', 'name'], type: 'GAUGE' },
  container_spec_cpu_shares: { labels: ['id', 'name'], type: 'GAUGE' },
  container_spec_memory_limit_bytes: { labels: ['id', 'name'], type: 'GAUGE' },
  container_network_receive_bytes_total: { labels: ['id', 'name', 'interface'], type: 'COUNTER' },
  container_network_receive_packets_total: { labels: ['id', 'name', 'interface'], type: 'COUNTER' },
  container_network_receive_packets_dropped_total: { labels: ['id', 'name', 'interface'], type: 'COUNTER' },
  container_network_receive_errors_total: { labels: ['id', 'name', 'interface'], type: 'COUNTER' },
  container_network_transmit_bytes_total: { labels: ['id', 'name', 'interface'], type: 'COUNTER' },
  container_network_transmit_packets_total: { labels: ['id', 'name', 'interface'], type: 'COUNTER' },
  container_network_transmit_packets_dropped_total: { labels: ['id', 'name', 'interface'], type: 'COUNTER' },
  container_network_transmit_errors_total: { labels: ['id', 'name', 'interface'], type: 'COUNTER' },
};

/** The cAdvisor pressure families (cgroup v2 hosts only). */
export const KUBELET_PRESSURE_METRICS = ['cpu', 'memory', 'io'].flatMap((r) => [`container_pressure_${r}_waiting_seconds_total`, `container_pressure_${r}_stalled_seconds_total`]);
