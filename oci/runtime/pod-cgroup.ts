// Pod-level limits written to the pod's cgroup (UpdatePodSandboxResources): the sum of the containers'
// resources plus the pod overhead, as kubelet sizes the pod cgroup itself. Best effort, as the CRI asks: a
// limit the kernel refuses is reported, not thrown.
import { writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { LinuxContainerResources__Output } from '../../gen/runtime/v1/LinuxContainerResources.js';
import { cgroupHierarchies } from './cgroups.js';

export interface PodLimits {
  memory?: number;
  cpuQuota?: number;
  cpuPeriod?: number;
  cpuShares?: number;
}

const num = (v: string | undefined): number => Number(v ?? 0) || 0;

/** The pod cgroup's limits: resources plus overhead; a resource of 0 (unset) leaves the limit alone. Pure. */
export function podCgroupLimits(
  resources: LinuxContainerResources__Output | null,
  overhead: LinuxContainerResources__Output | null,
): PodLimits {
  const out: PodLimits = {};
  if (!resources) return out;
  if (num(resources.memory_limit_in_bytes) > 0) {
    out.memory = num(resources.memory_limit_in_bytes) + Math.max(0, num(overhead?.memory_limit_in_bytes));
  }
  if (num(resources.cpu_quota) > 0) out.cpuQuota = num(resources.cpu_quota) + Math.max(0, num(overhead?.cpu_quota));
  if (num(resources.cpu_period) > 0) out.cpuPeriod = num(resources.cpu_period);
  if (num(resources.cpu_shares) > 0) out.cpuShares = Math.min(262_144, num(resources.cpu_shares) + Math.max(0, num(overhead?.cpu_shares)));
  return out;
}

/** The files (controller, name, value) that set the limits: cgroup v1 by controller, or the unified hierarchy. Pure. */
export function podCgroupFiles(limits: PodLimits, unified: boolean): { controller: string; file: string; value: string }[] {
  const out: { controller: string; file: string; value: string }[] = [];
  if (unified) {
    if (limits.memory !== undefined) out.push({ controller: '', file: 'memory.max', value: String(limits.memory) });
    if (limits.cpuQuota !== undefined || limits.cpuPeriod !== undefined) {
      out.push({ controller: '', file: 'cpu.max', value: `${limits.cpuQuota ?? 'max'} ${limits.cpuPeriod ?? 100_000}` });
    }
    // shares 2..262144 onto weight 1..10000, as runc converts them.
    if (limits.cpuShares !== undefined) {
      const weight = Math.max(1, 1 + Math.floor(((limits.cpuShares - 2) * 9999) / 262_142));
      out.push({ controller: '', file: 'cpu.weight', value: String(weight) });
    }
    return out;
  }
  if (limits.memory !== undefined) out.push({ controller: 'memory', file: 'memory.limit_in_bytes', value: String(limits.memory) });
  if (limits.cpuPeriod !== undefined) out.push({ controller: 'cpu', file: 'cpu.cfs_period_us', value: String(limits.cpuPeriod) });
  if (limits.cpuQuota !== undefined) out.push({ controller: 'cpu', file: 'cpu.cfs_quota_us', value: String(limits.cpuQuota) });
  if (limits.cpuShares !== undefined) out.push({ controller: 'cpu', file: 'cpu.shares', value: String(limits.cpuShares) });
  return out;
}

/** Writes the limits into the pod cgroup `relative` in each hierarchy that has it; returns what failed. */
export async function applyPodCgroupLimits(relative: string, limits: PodLimits): Promise<string[]> {
  const roots = await cgroupHierarchies();
  const unifiedRoot = roots.find((r) => r === '/sys/fs/cgroup' || basename(r) === 'unified');
  const v1 = roots.filter((r) => r !== unifiedRoot);
  const failures: string[] = [];
  for (const f of podCgroupFiles(limits, v1.length === 0)) {
    const root = f.controller === '' ? unifiedRoot : v1.find((r) => basename(r).split(',').includes(f.controller));
    if (!root) continue;
    const path = join(root, relative, f.file);
    await writeFile(path, f.value).catch((err: Error) => { failures.push(`${path} = ${f.value}: ${err.message}`); });
  }
  return failures;
}
