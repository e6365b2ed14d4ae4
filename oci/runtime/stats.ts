// Container resource usage from cgroups: cgroup v1 (cgroupfs layout, one hierarchy per controller)
// or the v2 unified hierarchy. Parsing and arithmetic are pure; only the readers touch the filesystem.
// CPU rate (nano cores) needs two samples: the caller keeps the previous one and calls nanoCores().
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { NotFound, Internal } from '../../core/errors.js';
import { exists } from '../../core/fs.js';

export interface CgroupStats {
  /** When the sample was taken. */
  timestamp: Date;
  /** Cumulative CPU time of all tasks, in nanoseconds. */
  cpuUsageNs: number;
  /** Total memory charged to the cgroup, page cache included. */
  memoryUsageBytes: number;
  /** Usage minus inactive file cache: what kubelet uses for eviction decisions. */
  workingSetBytes: number;
  rssBytes: number;
  pageFaults: number;
  majorPageFaults: number;
  /** Limit minus working set; undefined when there is no memory limit. */
  availableBytes: number | undefined;
}

/** Where one container's controllers live. */
export type CgroupDirs = { version: 1; cpuacct: string; memory: string } | { version: 2; unified: string };

export const CGROUP_ROOT = '/sys/fs/cgroup';

/** cgroup v1 reports "no limit" as a huge page-aligned number near 2^63: anything from here up is none. */
export const V1_UNLIMITED = 2 ** 62;

/** Parse a flat-keyed cgroup file ("key value" per line: memory.stat, cpu.stat). */
export function parseFlatKeyed(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const t = line.trim();
    if (t === '') continue;
    const [key, value, extra] = t.split(/\s+/);
    const n = Number(value);
    if (key === undefined || value === undefined || extra !== undefined || !Number.isFinite(n)) {
      throw new Internal(`unparsable cgroup stat line "${t}": expected "<key> <number>"`);
    }
    out.set(key, n);
  }
  return out;
}

/** Parse a single-value cgroup file; "max" (v2 for unlimited) gives undefined. */
export function parseSingleValue(text: string): number | undefined {
  const t = text.trim();
  if (t === 'max') return undefined;
  const n = Number(t);
  if (t === '' || !Number.isFinite(n)) throw new Internal(`unparsable cgroup value "${t}": expected a number or "max"`);
  return n;
}

export interface V1Files { cpuacctUsage: string; memoryUsage: string; memoryStat: string; memoryLimit: string }
export interface V2Files { cpuStat: string; memoryCurrent: string; memoryStat: string; memoryMax: string }

export function statsFromV1(f: V1Files, timestamp: Date): CgroupStats {
  const stat = parseFlatKeyed(f.memoryStat);
  const usage = parseSingleValue(f.memoryUsage) ?? 0;
  const limit = parseSingleValue(f.memoryLimit);
  const workingSet = workingSetOf(usage, stat.get('total_inactive_file') ?? 0);
  return {
    timestamp,
    cpuUsageNs: parseSingleValue(f.cpuacctUsage) ?? 0,
    memoryUsageBytes: usage,
    workingSetBytes: workingSet,
    rssBytes: stat.get('total_rss') ?? 0,
    pageFaults: stat.get('total_pgfault') ?? 0,
    majorPageFaults: stat.get('total_pgmajfault') ?? 0,
    availableBytes: limit === undefined || limit >= V1_UNLIMITED ? undefined : Math.max(0, limit - workingSet),
  };
}

export function statsFromV2(f: V2Files, timestamp: Date): CgroupStats {
  const cpu = parseFlatKeyed(f.cpuStat);
  const stat = parseFlatKeyed(f.memoryStat);
  const usage = parseSingleValue(f.memoryCurrent) ?? 0;
  const limit = parseSingleValue(f.memoryMax);
  const workingSet = workingSetOf(usage, stat.get('inactive_file') ?? 0);
  return {
    timestamp,
    cpuUsageNs: (cpu.get('usage_usec') ?? 0) * 1000,
    memoryUsageBytes: usage,
    workingSetBytes: workingSet,
    rssBytes: stat.get('anon') ?? 0,
    pageFaults: stat.get('pgfault') ?? 0,
    majorPageFaults: stat.get('pgmajfault') ?? 0,
    availableBytes: limit === undefined ? undefined : Math.max(0, limit - workingSet),
  };
}

function workingSetOf(usage: number, inactiveFile: number): number {
  return Math.max(0, usage - inactiveFile);
}

/** CPU usage rate between two samples of the same cgroup, in nanoseconds of CPU per second (1e9 = one core). */
export function nanoCores(prev: Pick<CgroupStats, 'timestamp' | 'cpuUsageNs'>, cur: Pick<CgroupStats, 'timestamp' | 'cpuUsageNs'>): number {
  const wallNs = (cur.timestamp.getTime() - prev.timestamp.getTime()) * 1e6;
  const cpuNs = cur.cpuUsageNs - prev.cpuUsageNs;
  // A restarted counter or a clock step gives nothing meaningful: report no usage rather than garbage.
  if (wallNs <= 0 || cpuNs < 0) return 0;
  return Math.round((cpuNs / wallNs) * 1e9);
}

/** Where a process's cgroups are: each v1 controller's directory, and the unified (v2) one. */
export interface ControllerPaths {
  v1: Map<string, string>;
  unified: string | undefined;
}

/**
 * Controller directories from /proc/<pid>/cgroup. v1 hierarchies are assumed mounted at
 * <root>/<controller list as named there> (e.g. "cpu,cpuacct"), which is the usual layout.
 */
export function controllerPathsFromProcCgroup(text: string, root = CGROUP_ROOT): ControllerPaths {
  const v1 = new Map<string, string>();
  let unified: string | undefined;
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const m = /^(\d+):([^:]*):(.*)$/.exec(line);
    if (!m) throw new Internal(`unparsable /proc/<pid>/cgroup line "${line}"`);
    const [, , controllerList, path] = m as unknown as [string, string, string, string];
    if (controllerList === '') unified = join(root, path);
    else for (const controller of controllerList.split(',')) v1.set(controller, join(root, controllerList, path));
  }
  return { v1, unified };
}

/** The cpuacct and memory directories (v1) or the unified one (v2) of a process, from /proc/<pid>/cgroup. */
export function cgroupDirsFromProcCgroup(text: string, root = CGROUP_ROOT): CgroupDirs {
  const { v1, unified } = controllerPathsFromProcCgroup(text, root);
  const cpuacct = v1.get('cpuacct');
  const memory = v1.get('memory');
  if (cpuacct !== undefined && memory !== undefined) return { version: 1, cpuacct, memory };
  // Pure v2 hosts mount the unified hierarchy at the root itself.
  if (unified !== undefined && cpuacct === undefined && memory === undefined) return { version: 2, unified };
  throw new Internal('cannot find the cpuacct and memory cgroups in /proc/<pid>/cgroup: mixed or partial cgroup setup');
}

/** Controller directories of an OCI linux.cgroupsPath under the cgroupfs driver. */
export async function cgroupDirsForPath(cgroupsPath: string, root = CGROUP_ROOT): Promise<CgroupDirs> {
  if (!cgroupsPath.startsWith('/') || cgroupsPath.split('/').includes('..')) {
    throw new Internal(`cgroupfs cgroupsPath "${cgroupsPath}" must be absolute without ".."`);
  }
  if (await exists(join(root, 'cgroup.controllers'))) return { version: 2, unified: join(root, cgroupsPath) };
  return { version: 1, cpuacct: join(root, 'cpuacct', cgroupsPath), memory: join(root, 'memory', cgroupsPath) };
}

/** Read one sample. Throws NotFound when the cgroup is gone (the container was deleted). */
export async function readCgroupStats(dirs: CgroupDirs): Promise<CgroupStats> {
  try {
    if (dirs.version === 1) {
      const [cpuacctUsage, memoryUsage, memoryStat, memoryLimit] = await Promise.all([
        readFile(join(dirs.cpuacct, 'cpuacct.usage'), 'utf8'),
        readFile(join(dirs.memory, 'memory.usage_in_bytes'), 'utf8'),
        readFile(join(dirs.memory, 'memory.stat'), 'utf8'),
        readFile(join(dirs.memory, 'memory.limit_in_bytes'), 'utf8'),
      ]);
      return statsFromV1({ cpuacctUsage, memoryUsage, memoryStat, memoryLimit }, new Date());
    }
    const [cpuStat, memoryCurrent, memoryStat, memoryMax] = await Promise.all(
      ['cpu.stat', 'memory.current', 'memory.stat', 'memory.max'].map((f) => readFile(join(dirs.unified, f), 'utf8')),
    ) as [string, string, string, string];
    return statsFromV2({ cpuStat, memoryCurrent, memoryStat, memoryMax }, new Date());
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      const where = dirs.version === 1 ? dirs.memory : dirs.unified;
      throw new NotFound(`cgroup ${where} does not exist: the container is not running or was removed`, { cause: err });
    }
    throw err;
  }
}

/** One sample for a running process's cgroups (e.g. a container's init pid). */
export async function readStatsForPid(pid: number, root = CGROUP_ROOT): Promise<CgroupStats> {
  let text: string;
  try {
    text = await readFile(`/proc/${pid}/cgroup`, 'utf8');
  } catch (err) {
    throw new NotFound(`process ${pid} does not exist: the container has exited`, { cause: err });
  }
  return readCgroupStats(cgroupDirsFromProcCgroup(text, root));
}
