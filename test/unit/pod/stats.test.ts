// A pod's stats as PodSandboxStats answers them: usage summed over its pause and containers, and on cgroup
// v2 the pressure of the pod cgroup itself (a temp dir stands in for the unified hierarchy).
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { detailFromV2, readPodCgroupPressure } from '../../../oci/runtime/cgroup-stats.js';
import type { ContainerRecord, SandboxRecord } from '../../../pod/records.js';
import { sandboxStatsOf, type Sample, type SandboxSample } from '../../../pod/stats.js';

const at = new Date(1_700_000_000_000);
const line = (avg10: string, total: number) => `avg10=${avg10} avg60=0.50 avg300=0.10 total=${total}`;

function cgroup(cpuUsageNs: number): Sample {
  return {
    timestamp: at, cpuUsageNs, memoryUsageBytes: 9000, workingSetBytes: 7000, rssBytes: 3000, pageFaults: 12, majorPageFaults: 1,
    availableBytes: undefined, nanoCores: undefined, detail: detailFromV2({ 'cgroup.procs': '1\n' }),
  };
}

function sample(podPressure: SandboxSample['podPressure']): SandboxSample {
  const record = { id: 's'.repeat(64), state: 'SANDBOX_READY', config: { metadata: { name: 'web', namespace: 'ns', uid: 'u', attempt: 0 } } } as unknown as SandboxRecord;
  const container = { record: { id: 'c'.repeat(64), config: { metadata: { name: 'app', attempt: 0 } } } as unknown as ContainerRecord, cgroup: cgroup(2_000), layer: undefined };
  return { record, pause: cgroup(500), network: undefined, containers: [container], podPressure };
}

test('on cgroup v2 a pod reports its own cgroup\'s cpu, memory and io pressure beside the summed usage', async () => {
  const root = await mkdtemp(join(tmpdir(), 'minicri-cgroup-'));
  try {
    const pod = join(root, 'kubepods', 'pod1');
    await mkdir(pod, { recursive: true });
    await writeFile(join(root, 'cgroup.controllers'), 'cpu io memory pids\n');
    await writeFile(join(pod, 'cpu.pressure'), `some ${line('1.25', 4000)}\nfull ${line('0.00', 0)}\n`);
    await writeFile(join(pod, 'memory.pressure'), `some ${line('2.00', 7000)}\nfull ${line('1.00', 3000)}\n`);
    await writeFile(join(pod, 'io.pressure'), `some ${line('3.50', 9000)}\nfull ${line('3.00', 8000)}\n`);
    const stats = sandboxStatsOf(sample(await readPodCgroupPressure('/kubepods/pod1', root)));
    const linux = stats.linux!;
    assert.equal(linux.cpu!.usage_core_nano_seconds!.value, '2500', 'pause plus container');
    assert.deepEqual(linux.cpu!.psi, { Some: { Total: '4000000', Avg10: 1.25, Avg60: 0.5, Avg300: 0.1 }, Full: { Total: '0', Avg10: 0, Avg60: 0.5, Avg300: 0.1 } });
    assert.deepEqual(linux.memory!.psi?.Full, { Total: '3000000', Avg10: 1, Avg60: 0.5, Avg300: 0.1 });
    assert.equal(linux.memory!.psi?.Some?.Total, '7000000');
    assert.ok(Number(linux.io!.timestamp) > 0);
    assert.deepEqual(linux.io!.psi, { Some: { Total: '9000000', Avg10: 3.5, Avg60: 0.5, Avg300: 0.1 }, Full: { Total: '8000000', Avg10: 3, Avg60: 0.5, Avg300: 0.1 } });
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

test('without the pod cgroup\'s pressure (cgroup v1, or no pod cgroup of its own) no pressure and no io are reported', () => {
  const linux = sandboxStatsOf(sample(undefined)).linux!;
  assert.equal(linux.cpu!.psi, null);
  assert.equal(linux.memory!.psi, null);
  assert.equal(linux.io, null);
  assert.equal(linux.memory!.working_set_bytes!.value, '14000');
  // A kernel with cpu and memory pressure but none for io.
  const partial = sandboxStatsOf(sample({ cpu: { some: { avg10: 0, avg60: 0, avg300: 0, totalNs: 1 }, full: undefined }, memory: undefined, io: undefined })).linux!;
  assert.deepEqual(partial.cpu!.psi, { Some: { Total: '1', Avg10: 0, Avg60: 0, Avg300: 0 }, Full: null });
  assert.equal(partial.io, null);
});
