import { test } from 'node:test';
import assert from 'node:assert/strict';
import { detailFromV1, detailFromV2 } from '../../../oci/runtime/cgroup-stats.js';
import { metricDescriptors, sandboxMetrics } from '../../../pod/metrics.js';
import type { ContainerRecord, SandboxRecord } from '../../../pod/records.js';
import type { Sample, SandboxSample } from '../../../pod/stats.js';
import { KUBELET_CADVISOR_METRICS, KUBELET_PRESSURE_METRICS } from '../../support/kubelet-metrics.js';

const at = new Date(1_700_000_000_000);

function cgroup(detail: Sample['detail']): Sample {
  return {
    timestamp: at, cpuUsageNs: 2_500_000_000, memoryUsageBytes: 9000, workingSetBytes: 7000, rssBytes: 3000, pageFaults: 12, majorPageFaults: 1,
    availableBytes: undefined, nanoCores: undefined, detail,
  };
}

const v1 = detailFromV1({
  'cpuacct.stat': 'user 150\nsystem 50\n', 'memory.usage_in_bytes': '9000\n', 'memory.limit_in_bytes': '9223372036854771712\n',
  'memory.stat': 'total_cache 4096\n', 'cgroup.procs': '1\n2\n', tasks: '1\n2\n3\n',
  'blkio.throttle.io_service_bytes_recursive': '8:16 Read 4096\n8:16 Write 1048576\nTotal 1052672\n',
  'blkio.throttle.io_serviced_recursive': '8:16 Read 1\n8:16 Write 256\nTotal 257\n',
});

function sample(detail: Sample['detail']): SandboxSample {
  const record = { id: 's'.repeat(64), state: 'SANDBOX_READY', config: { metadata: { name: 'web', namespace: 'ns', uid: 'u', attempt: 0 } } } as unknown as SandboxRecord;
  const container = (id: string, name: string, running: boolean) => ({
    record: {
      id, state: running ? 'CONTAINER_RUNNING' : 'CONTAINER_EXITED', startedAt: '1699999990000000000',
      config: { metadata: { name, attempt: 0 }, linux: { resources: { cpu_period: '100000', cpu_quota: '50000', cpu_shares: '512', memory_limit_in_bytes: '0' } } },
    } as unknown as ContainerRecord,
    cgroup: running ? cgroup({ ...detail, io: detail.io.map((d) => ({ ...d, device: '/dev/sdb' })) }) : undefined,
    layer: { timestamp: at, bytes: 8192, inodes: 4, mountpoint: '/var/lib/minicri' },
  });
  const iface = (name: string, rx: number) => ({ name, rxBytes: rx, rxPackets: 2, rxErrors: 0, rxDropped: 0, txBytes: 300, txPackets: 3, txErrors: 1, txDropped: 0 });
  return {
    record, pause: cgroup(detail), network: { timestamp: at, interfaces: [iface('eth0', 1000), iface('net1', 50)] },
    containers: [container('c'.repeat(64), 'app', true), container('d'.repeat(64), 'done', false)],
  };
}

test('descriptors name every family kubelet reads, with its label keys, once each', () => {
  const descriptors = metricDescriptors();
  const byName = new Map(descriptors.map((d) => [d.name, d]));
  assert.equal(byName.size, descriptors.length, 'no family is described twice');
  for (const [name, { labels }] of Object.entries(KUBELET_CADVISOR_METRICS)) assert.deepEqual(byName.get(name)?.label_keys, labels, name);
  for (const name of KUBELET_PRESSURE_METRICS) assert.deepEqual(byName.get(name)?.label_keys, ['id', 'name'], name);
  for (const d of descriptors) assert.ok(d.help, `${d.name} has help`);
});

test('a pod\'s metrics: network per interface on the pod, cgroup families per running container, types and labels as described', () => {
  const m = sandboxMetrics(sample(v1));
  const descriptors = new Map(metricDescriptors().map((d) => [d.name, d]));
  assert.equal(m.pod_sandbox_id, 's'.repeat(64));
  // The exited container has no cgroup and no metrics.
  assert.deepEqual(m.container_metrics?.map((c) => c.container_id), ['c'.repeat(64)]);
  const all = [...m.metrics!, ...m.container_metrics![0]!.metrics!];
  for (const metric of all) {
    const expected = KUBELET_CADVISOR_METRICS[metric.name!];
    assert.ok(expected || KUBELET_PRESSURE_METRICS.includes(metric.name!), `${metric.name} is a family kubelet knows`);
    assert.equal(metric.label_values?.length, descriptors.get(metric.name!)!.label_keys!.length, `${metric.name} has a value per label key`);
    if (expected) assert.equal(metric.metric_type, expected.type, metric.name!);
    assert.equal(metric.timestamp, '1700000000000000000');
  }
  const find = (name: string, ...labels: string[]) => all.find((x) => x.name === name && labels.every((l, i) => x.label_values![i] === l))?.value?.value;
  assert.equal(find('container_network_receive_bytes_total', 's'.repeat(64), 'web', 'eth0'), '1000');
  assert.equal(find('container_network_receive_bytes_total', 's'.repeat(64), 'web', 'net1'), '50');
  assert.equal(find('container_network_transmit_errors_total', 's'.repeat(64), 'web', 'net1'), '1');
  const app = ['c'.repeat(64), 'app'];
  assert.equal(find('container_cpu_usage_seconds_total', ...app), '2'); // whole seconds of 2.5
  assert.equal(find('container_cpu_user_seconds_total', ...app), '1');
  assert.equal(find('container_memory_working_set_bytes', ...app), '7000');
  assert.equal(find('container_memory_cache', ...app), '4096');
  assert.equal(find('container_memory_failures_total', ...app, 'pgmajfault', 'container'), '1');
  assert.equal(find('container_fs_writes_bytes_total', ...app, '/dev/sdb'), '1048576');
  assert.equal(find('container_blkio_device_usage_total', ...app, '/dev/sdb', '8', '16', 'Read'), '4096');
  assert.equal(find('container_fs_usage_bytes', ...app, '/var/lib/minicri'), '8192');
  assert.equal(find('container_processes', ...app), '2');
  assert.equal(find('container_threads', ...app), '3');
  assert.equal(find('container_start_time_seconds', ...app), '1699999990');
  assert.equal(find('container_spec_cpu_quota', ...app), '50000');
  // No memory limit: no spec sample; v1 without swap accounting: no swap sample; v1: no pressure.
  for (const absent of ['container_spec_memory_limit_bytes', 'container_memory_swap', ...KUBELET_PRESSURE_METRICS]) assert.equal(find(absent), undefined, absent);
});

test('cgroup v2 adds the pressure families (waiting = some, stalled = full) and swap', () => {
  const v2 = detailFromV2({
    'cpu.stat': 'usage_usec 1\n', 'memory.swap.current': '4096\n', 'memory.swap.max': 'max\n',
    'cpu.pressure': 'some avg10=0 avg60=0 avg300=0 total=3000000\nfull avg10=0 avg60=0 avg300=0 total=1000000\n',
    'io.pressure': 'some avg10=0 avg60=0 avg300=0 total=7000000\nfull avg10=0 avg60=0 avg300=0 total=0\n',
  });
  const metrics = sandboxMetrics(sample(v2)).container_metrics![0]!.metrics!;
  const value = (name: string) => metrics.find((x) => x.name === name)?.value?.value;
  assert.equal(value('container_pressure_cpu_waiting_seconds_total'), '3');
  assert.equal(value('container_pressure_cpu_stalled_seconds_total'), '1');
  assert.equal(value('container_pressure_io_waiting_seconds_total'), '7');
  assert.equal(value('container_pressure_memory_waiting_seconds_total'), undefined);
  assert.equal(value('container_memory_swap'), '4096');
});

test('a host-network or stopped pod has no network metrics', () => {
  assert.deepEqual(sandboxMetrics({ ...sample(v1), network: undefined }).metrics, []);
});
