import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { pool } from '../../../core/locks.js';
import { median, percentile, summarize } from '../../../bench/lib/stats.js';
import { medianOf, pick, table } from '../../../bench/lib/report.js';
import { shebangNodeCommand } from '../../../bench/lib/targets.js';
import { MAIN } from '../../support/daemon.js';

describe('bench statistics', () => {
  it('takes nearest-rank percentiles of unsorted samples', () => {
    const samples = [5, 1, 4, 2, 3, 10, 9, 8, 7, 6];
    assert.equal(percentile(samples, 50), 5);
    assert.equal(percentile(samples, 90), 9);
    assert.equal(percentile(samples, 99), 10);
    assert.equal(percentile([7], 99), 7);
    assert.ok(Number.isNaN(percentile([], 50)));
  });

  it('takes the median of odd and even counts and ignores non-finite values', () => {
    assert.equal(median([3, 1, 2]), 2);
    assert.equal(median([4, 1, 3, 2]), 2.5);
    assert.equal(median([Number.NaN, 1, 3]), 2);
    assert.ok(Number.isNaN(median([])));
  });

  it('summarises samples', () => {
    assert.deepEqual(summarize([1, 2, 3, 4]), { n: 4, p50: 2, p90: 4, p99: 4, mean: 2.5 });
  });

  it('runs a pool with bounded concurrency and keeps the order of results', async () => {
    let inFlight = 0;
    let most = 0;
    const out = await pool([30, 10, 20, 5, 15], 2, async (ms, i) => {
      most = Math.max(most, ++inFlight);
      await new Promise((r) => setTimeout(r, ms));
      inFlight--;
      return i;
    });
    assert.deepEqual(out, [0, 1, 2, 3, 4]);
    assert.equal(most, 2);
  });
});

describe('bench report', () => {
  it('takes medians leaf by leaf and counts list entries over all results', () => {
    const rounds = [
      { rpc: { Run: { p50: 10 } }, errors: ['a'], name: 'x' },
      { rpc: { Run: { p50: 30 } }, errors: [], name: 'x' },
      { rpc: { Run: { p50: 20 } }, errors: ['b', 'c'], name: 'x' },
    ];
    assert.deepEqual(medianOf(rounds), { rpc: { Run: { p50: 20 } }, errors: 3, name: 'x' });
  });

  it('picks a number by dotted path and nothing for a missing one', () => {
    assert.equal(pick({ a: { b: 2 } }, 'a.b'), 2);
    assert.equal(pick({ a: { b: 2 } }, 'a.c'), undefined);
    assert.equal(pick(undefined, 'a'), undefined);
  });

  it('renders a row with ratios and dashes where a target has no figure', () => {
    const md = table([{ metric: 'run (ms)', bench: 'life', path: 'p50' }], { life: { minicri: { p50: 50 }, containerd: { p50: 100 } } });
    assert.match(md, /^\| run \(ms\) \| 50\.0 \| 100 \| – \| 0\.50x \| – \|$/m);
  });
});

describe('shebangNodeCommand', () => {
  it('takes the environment and node flags of an env -S shebang, and nothing from another interpreter', () => {
    assert.deepEqual(shebangNodeCommand('#!/usr/bin/env -S node --max-semi-space-size=2 --heap-growing-percent=60\n// x'),
      { env: {}, nodeFlags: ['--max-semi-space-size=2', '--heap-growing-percent=60'] });
    const command = shebangNodeCommand('#!/usr/bin/env -S A_B=1 C=x=y node --flag\n');
    assert.deepEqual(command, { env: { A_B: '1', C: 'x=y' }, nodeFlags: ['--flag'] });
    assert.deepEqual(shebangNodeCommand('#!/usr/bin/env -S -u X -u Y A=1 node --f\n'), { env: { A: '1' }, nodeFlags: ['--f'] });
    assert.deepEqual(shebangNodeCommand('#!/usr/bin/env node\nx'), { env: {}, nodeFlags: [] });
    assert.deepEqual(shebangNodeCommand('#!/bin/sh -e\nx'), { env: {}, nodeFlags: [] });
    assert.deepEqual(shebangNodeCommand('#!/usr/bin/env -S X=1 python3\n'), { env: {}, nodeFlags: [] });
  });
  it('reads the daemon\'s own shebang', () => {
    const { env, nodeFlags } = shebangNodeCommand(readFileSync(MAIN, 'utf8'));
    assert.equal(env.MALLOC_MMAP_THRESHOLD_, '131072');
    assert.ok(nodeFlags.includes('--max-semi-space-size=1'));
  });
});
