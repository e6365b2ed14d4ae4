import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgument } from '../../../core/errors.js';
import { applyOpts, baseSpec } from '../../../oci/runtime/spec/opts.js';
import {
  clampOomScoreAdj, int64, linuxResources, withCpuShares, withOomScoreAdj, withResources,
} from '../../../oci/runtime/spec/resources.js';
import { resources } from './fixtures.js';

describe('linuxResources', () => {
  it('zero everywhere is nothing', () => {
    assert.deepEqual(linuxResources(resources()), {});
  });
  it('translates cpu, cpuset, memory, hugepages and unified', () => {
    const r = linuxResources(resources({
      cpu_period: '100000', cpu_quota: '50000', cpu_shares: '512', cpuset_cpus: '0-1,3', cpuset_mems: '0',
      memory_limit_in_bytes: '134217728', hugepage_limits: [{ page_size: '2MB', limit: '4194304' }],
      unified: { 'memory.high': '100000000' },
    }));
    assert.deepEqual(r, {
      cpu: { period: 100000, quota: 50000, shares: 512, cpus: '0-1,3', mems: '0' },
      memory: { limit: 134217728, swap: 134217728 },
      hugepageLimits: [{ pageSize: '2MB', limit: 4194304 }],
      unified: { 'memory.high': '100000000' },
    });
  });
  it('swap: explicit limit, -1 unlimited, and below the memory limit refused', () => {
    assert.deepEqual(linuxResources(resources({ memory_limit_in_bytes: '1000000', memory_swap_limit_in_bytes: '2000000' })).memory, { limit: 1000000, swap: 2000000 });
    assert.deepEqual(linuxResources(resources({ memory_limit_in_bytes: '1000000', memory_swap_limit_in_bytes: '-1' })).memory, { limit: 1000000, swap: -1 });
    assert.throws(() => linuxResources(resources({ memory_limit_in_bytes: '2000000', memory_swap_limit_in_bytes: '1000000' })), /below/);
    assert.throws(() => linuxResources(resources({ memory_swap_limit_in_bytes: '-5' })), InvalidArgument);
  });
  it('leaves swap out without swap accounting', () => {
    assert.deepEqual(linuxResources(resources({ memory_limit_in_bytes: '1000000' }), false).memory, { limit: 1000000 });
    assert.deepEqual(linuxResources(resources({ memory_limit_in_bytes: '1000000', memory_swap_limit_in_bytes: '2000000' }), false).memory, { limit: 1000000 });
  });
  it('quota -1 means unlimited', () => {
    assert.deepEqual(linuxResources(resources({ cpu_quota: '-1' })).cpu, { quota: -1 });
  });
  it('refuses negative and absurd values', () => {
    for (const over of [
      { cpu_period: '-1' }, { cpu_period: '10' }, { cpu_period: '5000000' }, { cpu_quota: '-2' }, { cpu_quota: '10' },
      { cpu_shares: '-5' }, { cpu_shares: '1' }, { cpu_shares: '999999' }, { memory_limit_in_bytes: '-1' },
      { cpuset_cpus: 'all' }, { cpuset_mems: '0-' }, { cpu_shares: '99999999999999999999' }, { cpu_shares: '1.5' },
    ]) {
      assert.throws(() => linuxResources(resources(over)), InvalidArgument, JSON.stringify(over));
    }
    assert.throws(() => linuxResources(resources({ hugepage_limits: [{ page_size: '2M', limit: '1' }] })), InvalidArgument);
    assert.throws(() => linuxResources(resources({ hugepage_limits: [{ page_size: '2MB', limit: '-1' }] })), InvalidArgument);
    assert.throws(() => linuxResources(resources({ unified: { '../x': '1' } })), InvalidArgument);
    assert.throws(() => linuxResources(resources({ unified: { 'memory.max': '1\n2' } })), InvalidArgument);
  });
  it('int64 parses CRI strings', () => {
    assert.equal(int64('f', '-12'), -12);
    assert.throws(() => int64('f', ''), InvalidArgument);
  });
});

describe('withResources / withCpuShares', () => {
  it('keeps device rules and merges over defaults', () => {
    const s = applyOpts(baseSpec('/r'), [withCpuShares(2), withResources(resources({ cpu_quota: '20000' }))]);
    assert.deepEqual(s.linux?.resources?.cpu, { shares: 2, quota: 20000 });
    assert.deepEqual(s.linux?.resources?.devices, [{ allow: false, access: 'rwm' }]);
    const t = applyOpts(baseSpec('/r'), [withCpuShares(2), withResources(resources({ cpu_shares: '256' }))]);
    assert.equal(t.linux?.resources?.cpu?.shares, 256);
  });
  it('null resources change nothing', () => {
    assert.deepEqual(applyOpts(baseSpec('/r'), [withResources(null)]).linux?.resources, baseSpec('/r').linux?.resources);
  });
});

describe('oom_score_adj', () => {
  it('clamps below the daemon\'s own value and says so', () => {
    assert.deepEqual(clampOomScoreAdj(-998, -500), { value: -500, clamped: true });
    assert.deepEqual(clampOomScoreAdj(1000, -500), { value: 1000, clamped: false });
    assert.deepEqual(clampOomScoreAdj(-500, -500), { value: -500, clamped: false });
  });
  it('refuses out-of-range values', () => {
    assert.throws(() => clampOomScoreAdj(1001, 0), InvalidArgument);
    assert.throws(() => clampOomScoreAdj(-1001, 0), InvalidArgument);
  });
  it('withOomScoreAdj sets the clamped value', () => {
    assert.equal(applyOpts(baseSpec('/r'), [withOomScoreAdj(-999, 0)]).process?.oomScoreAdj, 0);
  });
});
