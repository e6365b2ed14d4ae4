// The rest of a container's cgroup sample beyond cpu and memory (stats.ts): CPU split and throttling, page
// cache, swap, OOM kills, block I/O per device, process and thread counts and, on cgroup v2, pressure stall
// information; a pod cgroup's pressure; and a pod's interface counters from /proc/<pid>/net/dev. Parsers
// and builders are pure; the readers touch the filesystem and read each file once.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Internal, NotFound } from '../../core/errors.js';
import {
  CGROUP_ROOT, controllerPathsFromProcCgroup, parseFlatKeyed, parseSingleValue, statsFromV1, statsFromV2, V1_UNLIMITED, type CgroupStats,
} from './stats.js';
import { exists } from '../../core/fs.js';

/** Bytes and operations one cgroup did on one block device. */
export interface DeviceIo {
  major: number;
  minor: number;
  readBytes: number;
  writeBytes: number;
  reads: number;
  writes: number;
  /** The device node ("/dev/vda"), filled in by the reader; "major:minor" when sysfs does not name it. */
  device?: string;
}

/** One line of a pressure file: stall percentages over 10s/60s/300s and the total stall in nanoseconds. */
export interface PsiLine {
  avg10: number;
  avg60: number;
  avg300: number;
  totalNs: number;
}

export interface Psi {
  some: PsiLine;
  /** Absent from cpu.pressure on older kernels. */
  full: PsiLine | undefined;
}

export interface CgroupDetail {
  cpuUserNs: number | undefined;
  cpuSystemNs: number | undefined;
  cfsPeriods: number | undefined;
  cfsThrottledPeriods: number | undefined;
  cfsThrottledNs: number | undefined;
  cacheBytes: number;
  mappedFileBytes: number;
  activeFileBytes: number;
  inactiveFileBytes: number;
  maxUsageBytes: number | undefined;
  /** Times usage hit the limit (v1 memory.failcnt, v2 the "max" event). */
  failcnt: number | undefined;
  oomKills: number | undefined;
  /** Undefined when the kernel does not account swap for cgroups. */
  swapUsageBytes: number | undefined;
  /** Swap limit minus swap used; undefined without a swap limit. */
  swapAvailableBytes: number | undefined;
  io: DeviceIo[];
  processes: number;
  threads: number;
  /** cgroup v2 only. */
  psi: { cpu?: Psi; memory?: Psi; io?: Psi };
}

/** Cumulative counters of one network interface. */
export interface InterfaceCounters {
  name: string;
  rxBytes: number;
  rxPackets: number;
  rxErrors: number;
  rxDropped: number;
  txBytes: number;
  txPackets: number;
  txErrors: number;
  txDropped: number;
}

/** Every file a sample reads, by name; a file this kernel or configuration lacks is undefined. */
export type CgroupFiles = Record<string, string | undefined>;

// cpuacct.stat counts in USER_HZ ticks, 100 a second on every Linux architecture Kubernetes runs on.
const NS_PER_USER_HZ_TICK = 10_000_000;

function emptyIo(major: number, minor: number): DeviceIo {
  return { major, minor, readBytes: 0, writeBytes: 0, reads: 0, writes: 0 };
}

function deviceOf(byDevice: Map<string, DeviceIo>, majMin: string): DeviceIo {
  const m = /^(\d+):(\d+)$/.exec(majMin);
  if (!m) throw new Internal(`unparsable block device "${majMin}" in a cgroup io file: expected "<major>:<minor>"`);
  let device = byDevice.get(majMin);
  if (!device) byDevice.set(majMin, device = emptyIo(Number(m[1]), Number(m[2])));
  return device;
}

/** v1 blkio.*io_service_bytes* and *io_serviced* ("8:0 Read 4096" lines, then a "Total" line). */
export function parseBlkioV1(serviceBytes: string, serviced: string): DeviceIo[] {
  const byDevice = new Map<string, DeviceIo>();
  const add = (text: string, field: { Read: 'readBytes' | 'reads'; Write: 'writeBytes' | 'writes' }) => {
    for (const line of text.split('\n')) {
      const [majMin, op, value, extra] = line.trim().split(/\s+/);
      if (majMin === undefined || majMin === '' || majMin === 'Total' || extra !== undefined) continue;
      if (op !== 'Read' && op !== 'Write') continue;
      deviceOf(byDevice, majMin)[field[op]] += Number(value);
    }
  };
  add(serviceBytes, { Read: 'readBytes', Write: 'writeBytes' });
  add(serviced, { Read: 'reads', Write: 'writes' });
  return [...byDevice.values()];
}

/** v2 io.stat ("8:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0" per device). */
export function parseIoStatV2(text: string): DeviceIo[] {
  const byDevice = new Map<string, DeviceIo>();
  for (const line of text.split('\n')) {
    const [majMin, ...pairs] = line.trim().split(/\s+/);
    if (majMin === undefined || majMin === '') continue;
    const device = deviceOf(byDevice, majMin);
    for (const pair of pairs) {
      const [key, value] = pair.split('=');
      const n = Number(value);
      if (key === 'rbytes') device.readBytes += n;
      else if (key === 'wbytes') device.writeBytes += n;
      else if (key === 'rios') device.reads += n;
      else if (key === 'wios') device.writes += n;
    }
  }
  return [...byDevice.values()];
}

/** A pressure file ("some avg10=0.12 avg60=0.05 avg300=0.01 total=12345", then "full ..."); totals are µs there. */
export function parsePsi(text: string): Psi {
  const lines = new Map<string, PsiLine>();
  for (const line of text.split('\n')) {
    const [kind, ...pairs] = line.trim().split(/\s+/);
    if (kind === undefined || kind === '') continue;
    const values = Object.fromEntries(pairs.map((p) => p.split('='))) as Record<string, string | undefined>;
    const numbers = [values.avg10, values.avg60, values.avg300, values.total].map(Number);
    if (numbers.some((n) => !Number.isFinite(n))) {
      throw new Internal(`unparsable pressure line "${line}": expected "<some|full> avg10=.. avg60=.. avg300=.. total=.."`);
    }
    const [avg10, avg60, avg300, totalUs] = numbers as [number, number, number, number];
    lines.set(kind, { avg10, avg60, avg300, totalNs: totalUs * 1000 });
  }
  const some = lines.get('some');
  if (!some) throw new Internal('pressure file has no "some" line');
  return { some, full: lines.get('full') };
}

/** /proc/<pid>/net/dev: the counters of every interface of the process's network namespace but lo. */
export function parseNetDev(text: string): InterfaceCounters[] {
  const out: InterfaceCounters[] = [];
  // Two header lines, then "  eth0: rx bytes packets errs drop fifo frame compressed multicast tx bytes packets errs drop ...".
  for (const line of text.split('\n').slice(2)) {
    const colon = line.indexOf(':');
    if (colon < 0) continue;
    const name = line.slice(0, colon).trim();
    const f = line.slice(colon + 1).trim().split(/\s+/).map(Number);
    if (f.length < 16 || f.some((n) => !Number.isFinite(n))) throw new Internal(`unparsable /proc/net/dev line "${line.trim()}"`);
    if (name === 'lo') continue;
    out.push({
      name, rxBytes: f[0]!, rxPackets: f[1]!, rxErrors: f[2]!, rxDropped: f[3]!,
      txBytes: f[8]!, txPackets: f[9]!, txErrors: f[10]!, txDropped: f[11]!,
    });
  }
  return out;
}

function lineCount(text: string | undefined): number {
  return text ? text.split('\n').filter((l) => l.trim() !== '').length : 0;
}

const flat = (text: string | undefined) => (text === undefined ? new Map<string, number>() : parseFlatKeyed(text));
const single = (text: string | undefined) => (text === undefined ? undefined : parseSingleValue(text));

/** v1: one file per value, across the cpu, cpuacct, memory and blkio hierarchies. */
export function detailFromV1(f: CgroupFiles): CgroupDetail {
  const cpuacct = flat(f['cpuacct.stat']);
  const cpu = flat(f['cpu.stat']);
  const mem = flat(f['memory.stat']);
  const usage = single(f['memory.usage_in_bytes']) ?? 0;
  const limit = single(f['memory.limit_in_bytes']);
  const memswUsage = single(f['memory.memsw.usage_in_bytes']);
  const memswLimit = single(f['memory.memsw.limit_in_bytes']);
  // memsw counts memory and swap together: swap is the difference, and so is its limit.
  const swapUsage = memswUsage === undefined ? undefined : Math.max(0, memswUsage - usage);
  const swapLimit = memswLimit === undefined || limit === undefined || memswLimit >= V1_UNLIMITED
    ? undefined : Math.max(0, memswLimit - limit);
  const ticks = (key: string) => (cpuacct.has(key) ? cpuacct.get(key)! * NS_PER_USER_HZ_TICK : undefined);
  return {
    cpuUserNs: ticks('user'),
    cpuSystemNs: ticks('system'),
    cfsPeriods: cpu.get('nr_periods'),
    cfsThrottledPeriods: cpu.get('nr_throttled'),
    cfsThrottledNs: cpu.get('throttled_time'),
    cacheBytes: mem.get('total_cache') ?? 0,
    mappedFileBytes: mem.get('total_mapped_file') ?? 0,
    activeFileBytes: mem.get('total_active_file') ?? 0,
    inactiveFileBytes: mem.get('total_inactive_file') ?? 0,
    maxUsageBytes: single(f['memory.max_usage_in_bytes']),
    failcnt: single(f['memory.failcnt']),
    oomKills: flat(f['memory.oom_control']).get('oom_kill'),
    swapUsageBytes: swapUsage,
    swapAvailableBytes: swapLimit === undefined || swapUsage === undefined ? undefined : Math.max(0, swapLimit - swapUsage),
    io: parseBlkioV1(f['blkio.throttle.io_service_bytes_recursive'] ?? '', f['blkio.throttle.io_serviced_recursive'] ?? ''),
    processes: lineCount(f['cgroup.procs']),
    threads: lineCount(f.tasks),
    psi: {},
  };
}

/** v2: the unified hierarchy's flat files, io.stat and the pressure files. */
export function detailFromV2(f: CgroupFiles): CgroupDetail {
  const cpu = flat(f['cpu.stat']);
  const mem = flat(f['memory.stat']);
  const events = flat(f['memory.events']);
  const swapUsage = single(f['memory.swap.current']);
  const swapLimit = single(f['memory.swap.max']);
  const us = (key: string) => (cpu.has(key) ? cpu.get(key)! * 1000 : undefined);
  return {
    cpuUserNs: us('user_usec'),
    cpuSystemNs: us('system_usec'),
    cfsPeriods: cpu.get('nr_periods'),
    cfsThrottledPeriods: cpu.get('nr_throttled'),
    cfsThrottledNs: us('throttled_usec'),
    cacheBytes: mem.get('file') ?? 0,
    mappedFileBytes: mem.get('file_mapped') ?? 0,
    activeFileBytes: mem.get('active_file') ?? 0,
    inactiveFileBytes: mem.get('inactive_file') ?? 0,
    maxUsageBytes: single(f['memory.peak']),
    failcnt: events.get('max'),
    oomKills: events.get('oom_kill'),
    swapUsageBytes: swapUsage,
    swapAvailableBytes: swapUsage === undefined || swapLimit === undefined ? undefined : Math.max(0, swapLimit - swapUsage),
    io: parseIoStatV2(f['io.stat'] ?? ''),
    processes: lineCount(f['cgroup.procs']),
    threads: lineCount(f['cgroup.threads']),
    psi: pressureFromV2(f),
  };
}

/** The pressure files of a v2 cgroup; one the kernel does not write (no PSI) is left out. */
export function pressureFromV2(f: CgroupFiles): CgroupDetail['psi'] {
  const psi = (name: string) => (f[name] === undefined ? undefined : parsePsi(f[name]));
  return { cpu: psi('cpu.pressure'), memory: psi('memory.pressure'), io: psi('io.pressure') };
}

/** Which file of a sample lives in which v1 hierarchy. */
const V1_FILES: Record<string, string[]> = {
  cpuacct: ['cpuacct.usage', 'cpuacct.stat'],
  cpu: ['cpu.stat'],
  memory: ['memory.usage_in_bytes', 'memory.stat', 'memory.limit_in_bytes', 'memory.max_usage_in_bytes', 'memory.failcnt',
    'memory.oom_control', 'memory.memsw.usage_in_bytes', 'memory.memsw.limit_in_bytes', 'cgroup.procs', 'tasks'],
  blkio: ['blkio.throttle.io_service_bytes_recursive', 'blkio.throttle.io_serviced_recursive'],
};
const PRESSURE_FILES = ['cpu.pressure', 'memory.pressure', 'io.pressure'];
const V2_FILES = ['cpu.stat', 'memory.current', 'memory.stat', 'memory.max', 'memory.peak', 'memory.events', 'memory.swap.current',
  'memory.swap.max', 'io.stat', 'cgroup.procs', 'cgroup.threads', ...PRESSURE_FILES];

/** A file the sample must have: without it the cgroup is gone. */
const REQUIRED = new Set([
  'cpuacct.usage', 'memory.usage_in_bytes', 'memory.stat', 'memory.limit_in_bytes', 'cpu.stat', 'memory.current', 'memory.max',
]);

async function readFiles(paths: [name: string, path: string][]): Promise<CgroupFiles> {
  const texts = await Promise.all(paths.map(async ([name, path]) => {
    try {
      return await readFile(path, 'utf8');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (REQUIRED.has(name) || (code !== 'ENOENT' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP')) throw err;
      return undefined;
    }
  }));
  return Object.fromEntries(paths.map(([name], i) => [name, texts[i]]));
}

/** Device names do not change while the daemon runs: looked up once each. */
const deviceNames = new Map<string, Promise<string>>();

/** The node name of a block device from sysfs ("DEVNAME=vda" in its uevent), else "major:minor". */
function deviceName(major: number, minor: number): Promise<string> {
  const key = `${major}:${minor}`;
  let name = deviceNames.get(key);
  if (!name) {
    name = readFile(`/sys/dev/block/${key}/uevent`, 'utf8').then(
      (text) => { const m = /^DEVNAME=(.+)$/m.exec(text); return m ? `/dev/${m[1]}` : key; },
      () => key,
    );
    deviceNames.set(key, name);
  }
  return name;
}

async function named(io: DeviceIo[]): Promise<DeviceIo[]> {
  return Promise.all(io.map(async (d) => ({ ...d, device: await deviceName(d.major, d.minor) })));
}

/** A full sample of a process's cgroups: stats.ts's cpu and memory, and the detail. Throws NotFound when it is gone. */
export async function readFullStatsForPid(pid: number, root = CGROUP_ROOT): Promise<CgroupStats & { detail: CgroupDetail }> {
  try {
    const { v1, unified } = controllerPathsFromProcCgroup(await readFile(`/proc/${pid}/cgroup`, 'utf8'), root);
    const timestamp = new Date();
    if (v1.has('memory')) {
      const paths = Object.entries(V1_FILES).flatMap(([controller, names]) => {
        const dir = v1.get(controller);
        return dir === undefined ? [] : names.map((name): [string, string] => [name, join(dir, name)]);
      });
      const f = await readFiles(paths);
      const base = statsFromV1({
        cpuacctUsage: f['cpuacct.usage'] ?? '', memoryUsage: f['memory.usage_in_bytes']!,
        memoryStat: f['memory.stat']!, memoryLimit: f['memory.limit_in_bytes']!,
      }, timestamp);
      const detail = detailFromV1(f);
      return { ...base, detail: { ...detail, io: await named(detail.io) } };
    }
    if (unified === undefined) throw new Internal(`process ${pid} has neither a v1 memory cgroup nor a unified one`);
    const f = await readFiles(V2_FILES.map((name) => [name, join(unified, name)]));
    const detail = detailFromV2(f);
    const base = statsFromV2({
      cpuStat: f['cpu.stat']!, memoryCurrent: f['memory.current']!, memoryStat: f['memory.stat']!, memoryMax: f['memory.max']!,
    }, timestamp);
    return { ...base, detail: { ...detail, io: await named(detail.io) } };
  } catch (err) {
    // A cgroup removed while it is read answers ENODEV on the files already open.
    if (['ENOENT', 'ESRCH', 'ENODEV'].includes((err as NodeJS.ErrnoException).code ?? '')) {
      throw new NotFound(`process ${pid} or its cgroup is gone: the container has exited or was removed`, { cause: err });
    }
    throw err;
  }
}

/**
 * The pressure of a pod's own cgroup (`relative` below each hierarchy's root), which covers its pause, its
 * containers and whatever else runs there: pressure does not add up over the containers, so only the pod
 * cgroup can tell it. Undefined on cgroup v1 (no pressure files); a pod cgroup that is gone has none.
 */
export async function readPodCgroupPressure(relative: string, root = CGROUP_ROOT): Promise<CgroupDetail['psi'] | undefined> {
  // The unified hierarchy mounted at the root itself: a pure v2 host.
  if (!(await exists(join(root, 'cgroup.controllers')))) return undefined;
  const dir = join(root, relative);
  return pressureFromV2(await readFiles(PRESSURE_FILES.map((name) => [name, join(dir, name)])));
}

/** The interface counters of the network namespace process `pid` is in. Throws NotFound when the process is gone. */
export async function readInterfaceCounters(pid: number): Promise<InterfaceCounters[]> {
  let text: string;
  try {
    text = await readFile(`/proc/${pid}/net/dev`, 'utf8');
  } catch (err) {
    throw new NotFound(`process ${pid} does not exist: the pod's pause has exited`, { cause: err });
  }
  return parseNetDev(text);
}
