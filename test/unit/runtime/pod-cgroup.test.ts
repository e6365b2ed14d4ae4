// Pod cgroup limits from UpdatePodSandboxResources: resources plus overhead, as cgroup v1 and v2 files.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { podCgroupFiles, podCgroupLimits } from '../../../oci/runtime/pod-cgroup.js';
import { resources } from '../spec/fixtures.js';

test('the pod limits are the resources plus the overhead; unset ones are left alone', () => {
  assert.deepEqual(podCgroupLimits(resources({ memory_limit_in_bytes: '1000', cpu_quota: '50000', cpu_period: '100000', cpu_shares: '512' }),
    resources({ memory_limit_in_bytes: '24', cpu_quota: '10000', cpu_shares: '2' })),
  { memory: 1024, cpuQuota: 60000, cpuPeriod: 100000, cpuShares: 514 });
  assert.deepEqual(podCgroupLimits(resources({ memory_limit_in_bytes: '0', cpu_shares: '1024' }), null), { cpuShares: 1024 });
  assert.deepEqual(podCgroupLimits(null, resources({ memory_limit_in_bytes: '5' })), {});
});

test('cgroup v1 files by controller, v2 files in the unified hierarchy', () => {
  const limits = { memory: 1024, cpuQuota: 60000, cpuPeriod: 100000, cpuShares: 1024 };
  assert.deepEqual(podCgroupFiles(limits, false).map((f) => `${f.controller}/${f.file}=${f.value}`), [
    'memory/memory.limit_in_bytes=1024', 'cpu/cpu.cfs_period_us=100000', 'cpu/cpu.cfs_quota_us=60000', 'cpu/cpu.shares=1024',
  ]);
  assert.deepEqual(podCgroupFiles(limits, true).map((f) => `${f.file}=${f.value}`), ['memory.max=1024', 'cpu.max=60000 100000', 'cpu.weight=39']);
  assert.deepEqual(podCgroupFiles({ cpuPeriod: 50000 }, true).map((f) => `${f.file}=${f.value}`), ['cpu.max=max 50000']);
});
