// cgroup resources from CRI LinuxContainerResources. CRI int64s arrive as decimal strings; each
// is checked against what the kernel accepts so a typo fails here, not deep inside runc.
import type { LinuxContainerResources__Output } from '../../../gen/runtime/v1/LinuxContainerResources.js';
import { InvalidArgument } from '../../../core/errors.js';
import type { SpecOpt } from './opts.js';
import { processOf, resourcesOf } from './opts.js';
import type { LinuxResources } from './types.js';

/** A CRI int64 string as a safe JS integer. */
export function int64(field: string, text: string): number {
  if (!/^-?\d+$/.test(text)) throw new InvalidArgument(`${field} "${text}" is not an integer`);
  const n = Number(text);
  if (!Number.isSafeInteger(n)) throw new InvalidArgument(`${field} ${text} is too large`);
  return n;
}

function range(field: string, n: number, min: number, max: number): number {
  if (n < min || n > max) throw new InvalidArgument(`${field} ${n} is out of range: use 0 (unset) or a value between ${min} and ${max}`);
  return n;
}

// The kernel's cpuset list syntax: "0-3,8,10-11".
const CPUSET = /^\d+(-\d+)?(,\d+(-\d+)?)*$/;
// hugetlb page sizes as cgroups name them: 2MB, 1GB, 64KB...
const PAGE_SIZE = /^\d+(KB|MB|GB|TB|PB)$/;

/**
 * Translates CRI resources. Zero means unset for every field, as kubelet sends it. A memory limit
 * without a swap limit also caps swap at the limit, so a container does not swap by default.
 * Without swap accounting on the host (`swap` false) swap limits are left out: runc would fail
 * writing a memsw file that does not exist.
 */
export function linuxResources(r: LinuxContainerResources__Output, swap = true): LinuxResources {
  const out: LinuxResources = {};
  const period = int64('cpu_period', r.cpu_period);
  const quota = int64('cpu_quota', r.cpu_quota);
  const shares = int64('cpu_shares', r.cpu_shares);
  const memory = int64('memory_limit_in_bytes', r.memory_limit_in_bytes);
  const swapLimit = int64('memory_swap_limit_in_bytes', r.memory_swap_limit_in_bytes);

  const cpu: NonNullable<LinuxResources['cpu']> = {};
  if (period !== 0) cpu.period = range('cpu_period', period, 1000, 1_000_000);
  if (quota !== 0 && quota !== -1) cpu.quota = range('cpu_quota', quota, 1000, Number.MAX_SAFE_INTEGER);
  if (quota === -1) cpu.quota = -1; // explicitly unlimited
  if (shares !== 0) cpu.shares = range('cpu_shares', shares, 2, 262_144);
  if (r.cpuset_cpus !== '') {
    if (!CPUSET.test(r.cpuset_cpus)) throw new InvalidArgument(`cpuset_cpus "${r.cpuset_cpus}" is not a CPU list such as 0-3,6`);
    cpu.cpus = r.cpuset_cpus;
  }
  if (r.cpuset_mems !== '') {
    if (!CPUSET.test(r.cpuset_mems)) throw new InvalidArgument(`cpuset_mems "${r.cpuset_mems}" is not a NUMA node list such as 0-1`);
    cpu.mems = r.cpuset_mems;
  }
  if (Object.keys(cpu).length > 0) out.cpu = cpu;

  const mem: NonNullable<LinuxResources['memory']> = {};
  if (memory !== 0) mem.limit = range('memory_limit_in_bytes', memory, 1, Number.MAX_SAFE_INTEGER);
  if (swapLimit < -1) throw new InvalidArgument(`memory_swap_limit_in_bytes ${swapLimit} is negative: use -1 for unlimited`);
  if (swapLimit > 0 && mem.limit !== undefined && swapLimit < mem.limit) {
    throw new InvalidArgument(
      `memory_swap_limit_in_bytes ${swapLimit} is below memory_limit_in_bytes ${mem.limit}: it counts memory plus swap`,
    );
  }
  if (swap && swapLimit !== 0) mem.swap = swapLimit;
  else if (swap && mem.limit !== undefined) mem.swap = mem.limit;
  if (Object.keys(mem).length > 0) out.memory = mem;

  if (r.hugepage_limits.length > 0) {
    out.hugepageLimits = r.hugepage_limits.map((h) => {
      if (!PAGE_SIZE.test(h.page_size)) throw new InvalidArgument(`hugepage page_size "${h.page_size}" is not a size such as 2MB or 1GB`);
      const limit = int64(`hugepage limit for ${h.page_size}`, h.limit);
      if (limit < 0) throw new InvalidArgument(`hugepage limit for ${h.page_size} is negative`);
      return { pageSize: h.page_size, limit };
    });
  }

  const unified = Object.entries(r.unified);
  if (unified.length > 0) {
    for (const [key, value] of unified) {
      if (!/^[a-z][a-z0-9_]*\.[a-z0-9_.]+$/.test(key)) {
        throw new InvalidArgument(`unified cgroup key "${key}" is not a cgroup v2 file name such as memory.high`);
      }
      if (value.includes('\n')) throw new InvalidArgument(`unified cgroup value for "${key}" contains a newline`);
    }
    out.unified = { ...r.unified };
  }
  return out;
}

/** Merges CRI resources into the spec, keeping device rules and defaults set by other opts. */
export function withResources(r: LinuxContainerResources__Output | null, swap = true): SpecOpt {
  const t = r ? linuxResources(r, swap) : {};
  return (spec) => {
    const res = resourcesOf(spec);
    if (t.cpu) res.cpu = { ...res.cpu, ...t.cpu };
    if (t.memory) res.memory = { ...res.memory, ...t.memory };
    if (t.hugepageLimits) res.hugepageLimits = t.hugepageLimits;
    if (t.unified) res.unified = { ...res.unified, ...t.unified };
  };
}

/** A default cpu.shares that CRI resources, applied later, may override. */
export function withCpuShares(shares: number): SpecOpt {
  return (spec) => {
    const res = resourcesOf(spec);
    res.cpu = { ...res.cpu, shares };
  };
}

export const OOM_SCORE_ADJ_MIN = -1000;
export const OOM_SCORE_ADJ_MAX = 1000;

/**
 * The oom_score_adj a process may get: never below the daemon's own, because lowering it needs
 * CAP_SYS_RESOURCE, which runc may not have (it then fails obscurely). `clamped` tells the caller
 * to log it.
 */
export function clampOomScoreAdj(requested: number, daemonMin: number): { value: number; clamped: boolean } {
  if (!Number.isInteger(requested) || requested < OOM_SCORE_ADJ_MIN || requested > OOM_SCORE_ADJ_MAX) {
    throw new InvalidArgument(`oom_score_adj ${requested} is out of range: use a value between -1000 and 1000`);
  }
  return requested < daemonMin ? { value: daemonMin, clamped: true } : { value: requested, clamped: false };
}

export function withOomScoreAdj(requested: number, daemonMin: number): SpecOpt {
  const { value } = clampOomScoreAdj(requested, daemonMin);
  return (spec) => { processOf(spec).oomScoreAdj = value; };
}
