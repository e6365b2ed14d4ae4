import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Internal, NotFound } from '../../../core/errors.js';
import { detailFromV1, detailFromV2, parseBlkioV1, parseIoStatV2, parseNetDev, parsePsi, readFullStatsForPid, readInterfaceCounters, readPodCgroupPressure } from '../../../oci/runtime/cgroup-stats.js';
import { controllerPathsFromProcCgroup } from '../../../oci/runtime/stats.js';

// Samples as the kernel writes them (cgroup v1 blkio throttle files, v2 io.stat and pressure files, /proc/net/dev).
const blkioBytes = '8:16 Read 4096\n8:16 Write 1048576\n8:16 Sync 1052672\n8:16 Async 0\n8:16 Discard 0\n8:16 Total 1052672\n'
  + '8:0 Read 512\n8:0 Write 0\n8:0 Sync 512\n8:0 Async 0\n8:0 Discard 0\n8:0 Total 512\nTotal 1053184\n';
const blkioOps = '8:16 Read 1\n8:16 Write 256\n8:16 Sync 257\n8:16 Async 0\n8:16 Discard 0\n8:16 Total 257\nTotal 257\n';
const ioStat = '8:16 rbytes=4096 wbytes=1048576 rios=1 wios=256 dbytes=0 dios=0\n253:0 rbytes=0 wbytes=8192 rios=0 wios=2 dbytes=0 dios=0\n';
const pressure = 'some avg10=1.50 avg60=0.25 avg300=0.05 total=123456\nfull avg10=0.00 avg60=0.10 avg300=0.00 total=789\n';
const netDev = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     672       8    0    0    0     0          0         0      672       8    0    0    0     0       0          0
  eth0:    9814      61    2    1    0     0          0         0     7440      49    3    4    0     0       0          0
verylonginterface1: 100 2 0 0 0 0 0 0 200 3 0 0 0 0 0 0
  net1:       0       0    0    0    0     0          0         0      110       1    0    0    0     0       0          0
`;

test('v1 blkio files: bytes and operations per device, read and write, the Total lines ignored', () => {
  assert.deepEqual(parseBlkioV1(blkioBytes, blkioOps), [
    { major: 8, minor: 16, readBytes: 4096, writeBytes: 1048576, reads: 1, writes: 256 },
    { major: 8, minor: 0, readBytes: 512, writeBytes: 0, reads: 0, writes: 0 },
  ]);
  assert.deepEqual(parseBlkioV1('Total 0\n', 'Total 0\n'), []);
  assert.throws(() => parseBlkioV1('sda Read 1\n', ''), Internal);
});

test('v2 io.stat: bytes and operations per device', () => {
  assert.deepEqual(parseIoStatV2(ioStat), [
    { major: 8, minor: 16, readBytes: 4096, writeBytes: 1048576, reads: 1, writes: 256 },
    { major: 253, minor: 0, readBytes: 0, writeBytes: 8192, reads: 0, writes: 2 },
  ]);
  assert.deepEqual(parseIoStatV2(''), []);
});

test('pressure files: percentages as written, totals from microseconds to nanoseconds; "full" may be absent', () => {
  assert.deepEqual(parsePsi(pressure), {
    some: { avg10: 1.5, avg60: 0.25, avg300: 0.05, totalNs: 123_456_000 },
    full: { avg10: 0, avg60: 0.1, avg300: 0, totalNs: 789_000 },
  });
  assert.equal(parsePsi('some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n').full, undefined);
  assert.throws(() => parsePsi('some avg10=x\n'), Internal);
  assert.throws(() => parsePsi(''), Internal);
});

test('/proc/net/dev: every interface but lo, secondary ones and long names included', () => {
  const counters = parseNetDev(netDev);
  assert.deepEqual(counters.map((c) => c.name), ['eth0', 'verylonginterface1', 'net1']);
  assert.deepEqual(counters[0], { name: 'eth0', rxBytes: 9814, rxPackets: 61, rxErrors: 2, rxDropped: 1, txBytes: 7440, txPackets: 49, txErrors: 3, txDropped: 4 });
  assert.equal(counters[2]!.txBytes, 110);
  assert.throws(() => parseNetDev('h\nh\n eth0: 1 2 3\n'), Internal);
});

test('cgroup v1 detail: cpuacct ticks, throttling, page cache, swap from memsw, OOM kills, blkio, process and thread counts', () => {
  const d = detailFromV1({
    'cpuacct.stat': 'user 250\nsystem 50\n',
    'cpu.stat': 'nr_periods 10\nnr_throttled 2\nthrottled_time 5000000\n',
    'memory.stat': 'cache 1\ntotal_cache 8192\ntotal_mapped_file 4096\ntotal_active_file 1000\ntotal_inactive_file 2000\ntotal_rss 300\n',
    'memory.usage_in_bytes': '100000\n',
    'memory.limit_in_bytes': '1000000\n',
    'memory.memsw.usage_in_bytes': '150000\n',
    'memory.memsw.limit_in_bytes': '3000000\n',
    'memory.max_usage_in_bytes': '200000\n',
    'memory.failcnt': '3\n',
    'memory.oom_control': 'oom_kill_disable 0\nunder_oom 0\noom_kill 1\n',
    'blkio.throttle.io_service_bytes_recursive': blkioBytes,
    'blkio.throttle.io_serviced_recursive': blkioOps,
    'cgroup.procs': '10\n11\n',
    tasks: '10\n11\n12\n',
  });
  assert.equal(d.cpuUserNs, 2_500_000_000);
  assert.equal(d.cpuSystemNs, 500_000_000);
  assert.deepEqual([d.cfsPeriods, d.cfsThrottledPeriods, d.cfsThrottledNs], [10, 2, 5_000_000]);
  assert.deepEqual([d.cacheBytes, d.mappedFileBytes, d.activeFileBytes, d.inactiveFileBytes], [8192, 4096, 1000, 2000]);
  assert.deepEqual([d.maxUsageBytes, d.failcnt, d.oomKills], [200000, 3, 1]);
  // swap = memsw - memory; swap limit = memsw limit - memory limit (2000000); available = 2000000 - 50000.
  assert.deepEqual([d.swapUsageBytes, d.swapAvailableBytes], [50000, 1_950_000]);
  assert.equal(d.io[0]!.writeBytes, 1048576);
  assert.deepEqual([d.processes, d.threads], [2, 3]);
  assert.deepEqual(d.psi, {});
});

test('cgroup v1 detail without swap accounting, an unlimited memsw, and optional files missing', () => {
  const base = { 'memory.usage_in_bytes': '100\n', 'memory.limit_in_bytes': '9223372036854771712\n', 'memory.stat': '' };
  const none = detailFromV1(base);
  assert.deepEqual([none.swapUsageBytes, none.swapAvailableBytes, none.cpuUserNs, none.oomKills, none.processes], [undefined, undefined, undefined, undefined, 0]);
  assert.deepEqual(none.io, []);
  const unlimited = detailFromV1({ ...base, 'memory.memsw.usage_in_bytes': '100\n', 'memory.memsw.limit_in_bytes': '9223372036854771712\n' });
  assert.deepEqual([unlimited.swapUsageBytes, unlimited.swapAvailableBytes], [0, undefined]);
});

test('cgroup v2 detail: usec to ns, memory.events, swap files, io.stat, threads, and PSI of cpu, memory and io', () => {
  const d = detailFromV2({
    'cpu.stat': 'usage_usec 3000\nuser_usec 2000\nsystem_usec 1000\nnr_periods 4\nnr_throttled 1\nthrottled_usec 250\n',
    'memory.current': '9000\n',
    'memory.max': 'max\n',
    'memory.stat': 'anon 100\nfile 4096\nfile_mapped 1024\nactive_file 512\ninactive_file 256\n',
    'memory.peak': '12000\n',
    'memory.events': 'low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\n',
    'memory.swap.current': '4096\n',
    'memory.swap.max': '1048576\n',
    'io.stat': ioStat,
    'cgroup.procs': '1\n',
    'cgroup.threads': '1\n2\n',
    'cpu.pressure': pressure,
    'memory.pressure': 'some avg10=0.00 avg60=0.00 avg300=0.00 total=5\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1\n',
    'io.pressure': pressure,
  });
  assert.deepEqual([d.cpuUserNs, d.cpuSystemNs, d.cfsPeriods, d.cfsThrottledPeriods, d.cfsThrottledNs], [2_000_000, 1_000_000, 4, 1, 250_000]);
  assert.deepEqual([d.cacheBytes, d.mappedFileBytes, d.activeFileBytes, d.inactiveFileBytes], [4096, 1024, 512, 256]);
  assert.deepEqual([d.maxUsageBytes, d.failcnt, d.oomKills], [12000, 5, 1]);
  assert.deepEqual([d.swapUsageBytes, d.swapAvailableBytes], [4096, 1048576 - 4096]);
  assert.equal(d.io.length, 2);
  assert.deepEqual([d.processes, d.threads], [1, 2]);
  assert.equal(d.psi.cpu?.some.totalNs, 123_456_000);
  assert.equal(d.psi.memory?.full?.totalNs, 1000);
  assert.equal(d.psi.io?.some.avg10, 1.5);
  // Unlimited swap has no available bytes; a kernel without PSI has none of it.
  const bare = detailFromV2({ 'cpu.stat': 'usage_usec 0\n', 'memory.swap.current': '0\n', 'memory.swap.max': 'max\n' });
  assert.deepEqual([bare.swapUsageBytes, bare.swapAvailableBytes, bare.psi.cpu, bare.maxUsageBytes], [0, undefined, undefined, undefined]);
});

test('controller paths: every v1 controller of a line, and the unified path', () => {
  const paths = controllerPathsFromProcCgroup('9:name=systemd:/\n7:blkio:/p/c\n5:cpu,cpuacct:/p/c\n4:memory:/p/c\n0::/\n', '/cg');
  assert.equal(paths.v1.get('blkio'), '/cg/blkio/p/c');
  assert.equal(paths.v1.get('cpu'), '/cg/cpu,cpuacct/p/c');
  assert.equal(paths.v1.get('cpuacct'), '/cg/cpu,cpuacct/p/c');
  assert.equal(paths.unified, '/cg/');
});

test('reads this process\'s own cgroups and network namespace; a process that is gone is NotFound (left out by the lists)', async () => {
  const own = await readFullStatsForPid(process.pid);
  assert.ok(own.memoryUsageBytes > 0);
  assert.ok(own.detail.processes >= 1 && own.detail.threads >= own.detail.processes);
  assert.ok(Array.isArray(await readInterfaceCounters(process.pid)));
  // Above any pid_max: no such process.
  await assert.rejects(readFullStatsForPid(2 ** 23), NotFound);
  await assert.rejects(readInterfaceCounters(2 ** 23), NotFound);
});

test('a pod cgroup\'s pressure on cgroup v2, read from the pod\'s own directory; none on v1', async () => {
  const root = await mkdtemp(join(tmpdir(), 'minicri-cgroup-'));
  try {
    const pod = join(root, 'kubepods', 'burstable', 'pod1');
    await mkdir(pod, { recursive: true });
    await writeFile(join(pod, 'cpu.pressure'), pressure);
    await writeFile(join(pod, 'memory.pressure'), 'some avg10=0.00 avg60=0.00 avg300=0.00 total=5\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=2\n');
    // Without cgroup.controllers at the root this is no unified hierarchy: v1 has no pressure files.
    assert.equal(await readPodCgroupPressure('/kubepods/burstable/pod1', root), undefined);
    await writeFile(join(root, 'cgroup.controllers'), 'cpuset cpu io memory pids\n');
    const psi = await readPodCgroupPressure('/kubepods/burstable/pod1', root);
    assert.deepEqual(psi?.cpu, parsePsi(pressure));
    assert.equal(psi?.memory?.full?.totalNs, 2000);
    assert.equal(psi?.io, undefined, 'a kernel without io pressure');
    await writeFile(join(pod, 'io.pressure'), pressure);
    assert.deepEqual((await readPodCgroupPressure('/kubepods/burstable/pod1', root))?.io, parsePsi(pressure));
    assert.deepEqual(await readPodCgroupPressure('/kubepods/burstable/gone', root), { cpu: undefined, memory: undefined, io: undefined });
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});
