import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, mkdir, writeFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  parseFlatKeyed, parseSingleValue, statsFromV1, statsFromV2, nanoCores, cgroupDirsFromProcCgroup, cgroupDirsForPath, readCgroupStats,
} from '../../../oci/runtime/stats.js';
import { Internal, NotFound } from '../../../core/errors.js';

const v1MemoryStat = 'cache 100\nrss 50\ntotal_cache 4096000\ntotal_rss 2048000\ntotal_inactive_file 1000000\ntotal_pgfault 77\ntotal_pgmajfault 3\n';
const v2MemoryStat = 'anon 3000000\nfile 5000000\ninactive_file 2000000\npgfault 12\npgmajfault 1\n';

test('parses flat-keyed and single-value cgroup files', () => {
  assert.deepEqual([...parseFlatKeyed('a 1\nb 22\n\n')], [['a', 1], ['b', 22]]);
  assert.throws(() => parseFlatKeyed('a one'), Internal);
  assert.throws(() => parseFlatKeyed('a 1 2'), Internal);
  assert.equal(parseSingleValue('123\n'), 123);
  assert.equal(parseSingleValue('max\n'), undefined);
  assert.throws(() => parseSingleValue(''), Internal);
});

test('cgroup v1: working set is usage minus inactive file, unlimited memory has no available bytes', () => {
  const at = new Date(0);
  const s = statsFromV1({ cpuacctUsage: '5000\n', memoryUsage: '6000000\n', memoryStat: v1MemoryStat, memoryLimit: '9223372036854771712\n' }, at);
  assert.deepEqual(s, {
    timestamp: at, cpuUsageNs: 5000, memoryUsageBytes: 6000000, workingSetBytes: 5000000,
    rssBytes: 2048000, pageFaults: 77, majorPageFaults: 3, availableBytes: undefined,
  });
  const limited = statsFromV1({ cpuacctUsage: '0', memoryUsage: '500', memoryStat: 'total_inactive_file 1000\n', memoryLimit: '8000000' }, at);
  assert.equal(limited.workingSetBytes, 0); // never negative
  assert.equal(limited.availableBytes, 8000000);
});

test('cgroup v2: usage_usec becomes ns, memory.max bounds available bytes', () => {
  const at = new Date(0);
  const s = statsFromV2({ cpuStat: 'usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n', memoryCurrent: '9000000\n', memoryStat: v2MemoryStat, memoryMax: '10000000\n' }, at);
  assert.equal(s.cpuUsageNs, 1_500_000);
  assert.equal(s.workingSetBytes, 7_000_000);
  assert.equal(s.rssBytes, 3_000_000);
  assert.equal(s.availableBytes, 3_000_000);
  assert.equal(s.pageFaults, 12);
  assert.equal(statsFromV2({ cpuStat: 'usage_usec 0', memoryCurrent: '1', memoryStat: '', memoryMax: 'max' }, at).availableBytes, undefined);
});

test('nanoCores is CPU ns per wall second, and zero for nonsense samples', () => {
  const a = { timestamp: new Date(1000), cpuUsageNs: 1_000_000_000 };
  assert.equal(nanoCores(a, { timestamp: new Date(2000), cpuUsageNs: 1_500_000_000 }), 500_000_000);
  assert.equal(nanoCores(a, { timestamp: new Date(1000), cpuUsageNs: 2_000_000_000 }), 0);
  assert.equal(nanoCores(a, { timestamp: new Date(3000), cpuUsageNs: 0 }), 0);
});

test('finds controller dirs in /proc/<pid>/cgroup for v1 (combined or split mounts) and v2', () => {
  const hybrid = '9:name=systemd:/\n4:memory:/pods/c1\n2:cpuacct:/pods/c1\n1:cpu:/pods/c1\n0::/\n';
  assert.deepEqual(cgroupDirsFromProcCgroup(hybrid, '/cg'), { version: 1, cpuacct: '/cg/cpuacct/pods/c1', memory: '/cg/memory/pods/c1' });
  const combined = '5:cpu,cpuacct:/a\n3:memory:/a\n';
  assert.deepEqual(cgroupDirsFromProcCgroup(combined, '/cg'), { version: 1, cpuacct: '/cg/cpu,cpuacct/a', memory: '/cg/memory/a' });
  assert.deepEqual(cgroupDirsFromProcCgroup('0::/kubepods/c2\n', '/cg'), { version: 2, unified: '/cg/kubepods/c2' });
  assert.throws(() => cgroupDirsFromProcCgroup('4:memory:/a\n', '/cg'), Internal);
  assert.throws(() => cgroupDirsFromProcCgroup('nonsense\n', '/cg'), Internal);
});

test('reads v1 and v2 fixture trees; a missing cgroup is NotFound', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'minicri-rt-unit-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const v1 = join(root, 'v1');
  await mkdir(join(v1, 'cpuacct', 'p', 'c'), { recursive: true });
  await mkdir(join(v1, 'memory', 'p', 'c'), { recursive: true });
  await writeFile(join(v1, 'cpuacct', 'p', 'c', 'cpuacct.usage'), '42\n');
  await writeFile(join(v1, 'memory', 'p', 'c', 'memory.usage_in_bytes'), '6000000\n');
  await writeFile(join(v1, 'memory', 'p', 'c', 'memory.stat'), v1MemoryStat);
  await writeFile(join(v1, 'memory', 'p', 'c', 'memory.limit_in_bytes'), '9223372036854771712\n');
  const d1 = await cgroupDirsForPath('/p/c', v1);
  assert.equal(d1.version, 1);
  assert.equal((await readCgroupStats(d1)).cpuUsageNs, 42);

  const v2 = join(root, 'v2');
  await mkdir(join(v2, 'p', 'c'), { recursive: true });
  await writeFile(join(v2, 'cgroup.controllers'), 'cpu memory\n');
  for (const [f, c] of Object.entries({ 'cpu.stat': 'usage_usec 7\n', 'memory.current': '9000000\n', 'memory.stat': v2MemoryStat, 'memory.max': 'max\n' })) {
    await writeFile(join(v2, 'p', 'c', f), c);
  }
  const d2 = await cgroupDirsForPath('/p/c', v2);
  assert.deepEqual(d2, { version: 2, unified: join(v2, 'p', 'c') });
  assert.equal((await readCgroupStats(d2)).cpuUsageNs, 7000);

  await assert.rejects(readCgroupStats(await cgroupDirsForPath('/p/gone', v1)), NotFound);
  await assert.rejects(cgroupDirsForPath('relative', v1), Internal);
  await assert.rejects(cgroupDirsForPath('/p/../etc', v1), Internal);
});
