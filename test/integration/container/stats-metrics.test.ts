// Stats and CRI metrics through the real daemon: a container's block I/O, a pod's network counters per
// interface (two pods pinging across the test bridge; a second interface in the pod's namespace), process
// counts, the list filters, the metric families kubelet reads with counters that only grow, and the startup
// timeline in verbose status and on the metrics endpoint.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { execa } from 'execa';
import type { Metric__Output } from '../../../gen/runtime/v1/Metric.js';
import type { PodSandboxMetrics__Output } from '../../../gen/runtime/v1/PodSandboxMetrics.js';
import { waitFor } from '../../support/cni-env.js';
import { KUBELET_CADVISOR_METRICS } from '../../support/kubelet-metrics.js';
import { freePort } from '../../support/registry.js';
import { ContainerEnv, type Pod } from './env.js';

const MiB = 1024 * 1024;
const port = await freePort();

interface VerboseInfo {
  netnsPath: string;
  timeline: { step: string; ms: number; plugin?: string; network?: string }[];
}

/**
 * Makes the kernel count a container's block I/O: cgroup v1 on recent kernels (6.x here) keeps the blkio throttle
 * counters only for a group with a rule, so a limit no write reaches goes on the device of the daemon's root.
 * cgroup v2's io.stat counts every group.
 */
async function countBlockIo(env: ContainerEnv, id: string): Promise<void> {
  const pid = (JSON.parse((await env.rt.runtime.call('ContainerStatus', { container_id: id, verbose: true })).info.info!) as { pid: number }).pid;
  const line = (await readFile(`/proc/${pid}/cgroup`, 'utf8')).split('\n').find((l) => /^\d+:blkio:/.test(l));
  if (!line) return;
  const { dev } = await stat(env.dirs.rootDir);
  const device = `${Math.floor(dev / 256) & 0xfff}:${(dev & 0xff) | ((dev >> 12) & 0xfff00)}`;
  await writeFile(`/sys/fs/cgroup/blkio${line.slice(line.indexOf(':', line.indexOf(':') + 1) + 1)}/blkio.throttle.write_bps_device`, `${device} ${1024 ** 4}\n`);
}

describe('stats and metrics', () => {
  let env: ContainerEnv;
  before(async () => { env = await ContainerEnv.start(93, `metrics_address = "127.0.0.1:${port}"`); });
  after(() => env.stop());

  const podInfo = async (pod: Pod) => JSON.parse((await env.rt.runtime.call('PodSandboxStatus', { pod_sandbox_id: pod.id, verbose: true })).info.info!) as VerboseInfo;
  const podIp = async (pod: Pod) => (await env.rt.runtime.call('PodSandboxStatus', { pod_sandbox_id: pod.id })).status!.network!.ip;
  const podMetrics = async (pod: Pod): Promise<PodSandboxMetrics__Output> => {
    const all = (await env.rt.runtime.call('ListPodSandboxMetrics', {})).pod_metrics;
    return all.find((m) => m.pod_sandbox_id === pod.id)!;
  };
  /** Every sample of a pod and its containers, keyed by name and label values. */
  const byKey = (m: PodSandboxMetrics__Output) =>
    new Map([...m.metrics, ...m.container_metrics.flatMap((c) => c.metrics)].map((x): [string, Metric__Output] => [`${x.name}{${x.label_values.join(',')}}`, x]));

  it('shows a container\'s block I/O in the metrics, and swap (where the kernel accounts it) in ContainerStats', async (t) => {
    const pod = await env.runPod(t, 'io');
    // It writes once told to: a recent cgroup v1 kernel counts block I/O only in a group with a throttle rule.
    const id = await env.run(pod, 'writer', ['sh', '-c', 'while [ ! -e /go ]; do sleep 0.1; done; dd if=/dev/zero of=/data bs=1M count=8 oflag=direct && sleep 1000']);
    await countBlockIo(env, id);
    assert.equal((await env.exec(id, 'touch /go')).exitCode, 0);
    const name = 'writer';
    let written = 0;
    await waitFor(async () => {
      const metrics = (await podMetrics(pod)).container_metrics.find((c) => c.container_id === id)?.metrics ?? [];
      written = metrics.filter((x) => x.name === 'container_fs_writes_bytes_total' && x.label_values[1] === name).reduce((n, x) => n + Number(x.value!.value), 0);
      return written >= 8 * MiB;
    }, 15_000, 'the container\'s writes to show in container_fs_writes_bytes_total');
    const blkio = (await podMetrics(pod)).container_metrics.find((c) => c.container_id === id)!.metrics
      .filter((x) => x.name === 'container_blkio_device_usage_total' && x.label_values.at(-1) === 'Write');
    assert.ok(blkio.reduce((n, x) => n + Number(x.value!.value), 0) >= 8 * MiB, 'and in container_blkio_device_usage_total');
    assert.match(blkio[0]!.label_values[2]!, /^\/dev\/|^\d+:\d+$/, 'the device is named');

    const stats = (await env.rt.runtime.call('ContainerStats', { container_id: id })).stats!;
    assert.ok(Number(stats.memory!.working_set_bytes!.value) > 0);
    if (existsSync('/sys/fs/cgroup/memory/memory.memsw.usage_in_bytes') || existsSync('/sys/fs/cgroup/memory.swap.current')) {
      assert.ok(stats.swap, 'swap usage where the kernel accounts swap');
      assert.ok(Number(stats.swap.timestamp) > 0);
      assert.ok(stats.swap.swap_usage_bytes);
    }
    // IoUsage carries pressure only, which cgroup v1 does not have.
    if (!existsSync('/sys/fs/cgroup/cgroup.controllers')) assert.equal(stats.io, null);
  });

  it('counts a pod\'s network bytes per interface: two pods ping across the bridge; a second interface is listed too', async (t) => {
    const a = await env.runPod(t, 'net-a');
    const b = await env.runPod(t, 'net-b');
    const pinger = await env.run(a, 'pinger', ['sleep', '1000']);
    // A second interface in pod A's namespace, as a secondary network would add (a dummy: nothing leaves the namespace).
    const { netnsPath } = await podInfo(a);
    await execa('nsenter', [`--net=${netnsPath}`, 'ip', 'link', 'add', 'net1', 'type', 'veth', 'peer', 'name', 'net1peer']);
    await execa('nsenter', [`--net=${netnsPath}`, 'ip', 'link', 'set', 'net1', 'up']);
    const before = (await env.rt.runtime.call('PodSandboxStats', { pod_sandbox_id: a.id })).stats!.linux!.network!;
    const ping = await env.exec(pinger, `ping -c 5 -i 0.2 -s 1000 -W 3 ${await podIp(b)}`, 20);
    assert.equal(ping.exitCode, 0, `ping from pod A to pod B: ${ping.stdout}${ping.stderr}`);

    const statsA = (await env.rt.runtime.call('PodSandboxStats', { pod_sandbox_id: a.id })).stats!.linux!;
    const statsB = (await env.rt.runtime.call('PodSandboxStats', { pod_sandbox_id: b.id })).stats!.linux!;
    const eth0 = statsA.network!.default_interface!;
    assert.equal(eth0.name, 'eth0');
    assert.ok(Number(statsA.network!.timestamp) > 0);
    assert.ok(Number(eth0.tx_bytes!.value) - Number(before.default_interface!.tx_bytes!.value) >= 5 * 1000, `A sent 5 pings of 1000 bytes: ${eth0.tx_bytes!.value}`);
    assert.ok(Number(eth0.rx_bytes!.value) - Number(before.default_interface!.rx_bytes!.value) >= 5 * 1000, 'and got 5 replies');
    assert.equal(eth0.rx_errors!.value, '0');
    assert.ok(Number(statsB.network!.default_interface!.rx_bytes!.value) >= 5 * 1000, 'B received them');
    assert.deepEqual(statsA.network!.interfaces.map((i) => i.name).sort(), ['net1', 'net1peer'], 'every interface but lo, beside the default one');
    assert.deepEqual(statsB.network!.interfaces, []);

    const metrics = byKey(await podMetrics(a));
    const rx = metrics.get(`container_network_receive_bytes_total{${a.id},net-a,eth0}`);
    assert.equal(rx?.metric_type, 'COUNTER');
    assert.ok(Number(rx!.value!.value) >= Number(eth0.rx_bytes!.value));
    assert.ok(metrics.has(`container_network_transmit_errors_total{${a.id},net-a,net1}`), 'the second interface has its metrics');
  });

  it('counts the processes of a pod (pause and containers), and its containers\' threads', async (t) => {
    const pod = await env.runPod(t, 'procs');
    const id = await env.run(pod, 'three', ['sh', '-c', 'sleep 1000 & sleep 1000 & wait']);
    // sh and its two sleeps, and the pause.
    await waitFor(async () => (await env.rt.runtime.call('PodSandboxStats', { pod_sandbox_id: pod.id })).stats!.linux!.process!.process_count!.value === '4',
      10_000, 'the pod to count 4 processes');
    const metrics = byKey(await podMetrics(pod));
    assert.equal(metrics.get(`container_processes{${id},three}`)!.value!.value, '3');
    assert.equal(metrics.get(`container_processes{${id},three}`)!.metric_type, 'GAUGE');
    assert.ok(Number(metrics.get(`container_threads{${id},three}`)!.value!.value) >= 3);
  });

  it('filters container and pod stats by id, pod and labels; a container not running has no cgroup sample', async (t) => {
    const a = await env.runPod(t, 'filter-a');
    const b = await env.runPod(t, 'filter-b');
    const runningA = await env.run(a, 'run-a', ['sleep', '1000']);
    const runningB = await env.run(b, 'run-b', ['sleep', '1000']);
    const done = await env.run(a, 'done', ['true']);
    await env.waitExited(done);
    const ids = async (filter: object) => (await env.rt.runtime.call('ListContainerStats', { filter })).stats.map((s) => s.attributes!.id)
      .filter((id) => [runningA, runningB, done].includes(id)).sort();
    assert.deepEqual(await ids({}), [runningA, runningB, done].sort());
    assert.deepEqual(await ids({ pod_sandbox_id: a.id }), [runningA, done].sort());
    assert.deepEqual(await ids({ pod_sandbox_id: a.id.slice(0, 12) }), [runningA, done].sort());
    assert.deepEqual(await ids({ id: runningB.slice(0, 12) }), [runningB]);
    assert.deepEqual(await ids({ label_selector: { container: 'run-a' } }), [runningA]);
    assert.deepEqual(await ids({ pod_sandbox_id: b.id, label_selector: { container: 'run-a' } }), []);
    const exited = (await env.rt.runtime.call('ContainerStats', { container_id: done })).stats!;
    assert.equal(exited.cpu, null);
    assert.equal(exited.memory, null);

    const pods = async (filter: object) => (await env.rt.runtime.call('ListPodSandboxStats', { filter })).stats.map((s) => s.attributes!.id)
      .filter((id) => [a.id, b.id].includes(id)).sort();
    assert.deepEqual(await pods({}), [a.id, b.id].sort());
    assert.deepEqual(await pods({ id: b.id.slice(0, 12) }), [b.id]);
    assert.deepEqual(await pods({ label_selector: { app: 'filter-a' } }), [a.id]);
    assert.deepEqual(await pods({ id: a.id, label_selector: { app: 'filter-b' } }), []);
  });

  it('describes the metric families kubelet reads and reports them with counters that only grow', async (t) => {
    const pod = await env.runPod(t, 'metrics');
    const id = await env.run(pod, 'busy', ['sh', '-c', 'while :; do :; done'], (c) => { c.linux = { resources: { cpu_period: 100000, cpu_quota: 50000 } }; });
    const descriptors = new Map((await env.rt.runtime.call('ListMetricDescriptors', {})).descriptors.map((d) => [d.name, d.label_keys]));
    for (const [name, { labels }] of Object.entries(KUBELET_CADVISOR_METRICS)) assert.deepEqual(descriptors.get(name), labels, name);

    const first = byKey(await podMetrics(pod));
    const cpu = (m: Map<string, Metric__Output>) => Number(m.get(`container_cpu_usage_seconds_total{${id},busy}`)?.value?.value);
    let second = first;
    await waitFor(async () => cpu(second = byKey(await podMetrics(pod))) >= 1, 15_000, 'the busy loop to use a CPU second');
    for (const [key, metric] of second) {
      assert.ok(descriptors.has(metric.name), `${metric.name} is described`);
      assert.equal(metric.label_values.length, descriptors.get(metric.name)!.length, `${key} has a value per label key`);
      assert.equal(metric.metric_type, KUBELET_CADVISOR_METRICS[metric.name]?.type ?? metric.metric_type, `${key} has kubelet's type`);
      assert.ok(Number(metric.timestamp) > 0, `${key} says when it was sampled`);
      const earlier = first.get(key);
      if (metric.metric_type === 'COUNTER' && earlier) assert.ok(Number(metric.value!.value) >= Number(earlier.value!.value), `${key} only grows`);
    }
    const own = (name: string) => second.get(`${name}{${id},busy}`)?.value?.value;
    assert.ok(Number(own('container_memory_working_set_bytes')) > 0);
    assert.ok(Number(own('container_cpu_cfs_periods_total')) > 0, 'a CPU quota is enforced in periods');
    assert.equal(own('container_spec_cpu_quota'), '50000');
    assert.equal(own('container_start_time_seconds'), String(Math.floor(Number((await env.status(id)).started_at) / 1e9)), 'the start time ContainerStatus reports');
    assert.ok(second.get(`container_fs_usage_bytes{${id},busy,${env.dirs.rootDir}/images}`), 'the writable layer\'s use, on the image filesystem by default');

    // The streaming twin: the same pods in chunks, then an OK end.
    const streamed: PodSandboxMetrics__Output[] = [];
    for await (const chunk of env.rt.runtime.stream('StreamPodSandboxMetrics', {})) streamed.push(...chunk.pod_sandbox_metrics);
    assert.ok(streamed.some((m) => m.pod_sandbox_id === pod.id && m.container_metrics.some((c) => c.container_id === id)));
  });

  it('keeps a startup timeline per sandbox and container: verbose status, and the step histogram on the metrics endpoint', async (t) => {
    const pod = await env.runPod(t, 'timeline');
    const id = await env.run(pod, 'app', ['sleep', '1000']);
    const { timeline } = await podInfo(pod);
    const steps = new Set(timeline.map((e) => e.step));
    for (const step of ['pause-image', 'netns', 'cni', 'cni-add', 'pause-rootfs', 'pause-create', 'pause-start', 'total']) assert.ok(steps.has(step), `sandbox step ${step}`);
    // Every plugin of the chain, and the loopback, has its ADD timed.
    assert.deepEqual(timeline.filter((e) => e.step === 'cni-add').map((e) => e.plugin).sort(), ['bridge', 'loopback', 'portmap']);
    assert.ok(timeline.every((e) => e.ms >= 0));
    const total = timeline.find((e) => e.step === 'total')!.ms;
    assert.ok(timeline.every((e) => e.ms <= total), 'no step is longer than the whole');

    const container = JSON.parse((await env.rt.runtime.call('ContainerStatus', { container_id: id, verbose: true })).info.info!) as VerboseInfo;
    assert.deepEqual(container.timeline.map((e) => e.step), ['image-lookup', 'rootfs', 'spec', 'runc-create', 'total', 'runc-start']);

    const scrape = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const count = (labels: string) => Number(scrape.split('\n').find((l) => l.startsWith(`minicri_pod_start_step_seconds_count{${labels}} `))?.split(' ')[1]);
    assert.ok(count('kind="sandbox",step="cni-add",plugin="bridge"') >= 1, 'the bridge plugin\'s ADD is in the histogram');
    assert.ok(count('kind="sandbox",step="pause-start",plugin=""') >= 1);
    assert.ok(count('kind="container",step="runc-start",plugin=""') >= 1);
  });
});
