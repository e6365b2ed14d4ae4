import assert from 'node:assert/strict';
import { it } from 'node:test';
import { bundleOf, parseProcStat, runcStatus } from '../../../oci/runtime/runc-state.js';

const STAT = '10847 (sh -c (x)) S 1 10847 10847 0 -1 4194560 120 0 0 0 7 5 0 0 20 0 1 0 420988 2580480 171 18446744073709551615';
const STATE = { init_process_pid: 10847, init_process_start: '420988', config: { labels: ['a=b', 'bundle=/var/lib/minicri/sandboxes/abc'] } };

it('reads state, parent, minor faults, CPU time and start time past a command name with spaces and parentheses', () => {
  assert.deepEqual(parseProcStat(STAT), { state: 'S', ppid: 1, minorFaults: 120, cpuTicks: 12, startTime: 420988 });
});

it('applies runc status rules: fifo means created, a live init means running, anything else stopped', () => {
  assert.equal(runcStatus(STATE, STAT, true), 'created');
  assert.equal(runcStatus(STATE, STAT, false), 'running');
  assert.equal(runcStatus(STATE, undefined, false), 'stopped', 'no such process');
  assert.equal(runcStatus(STATE, STAT.replace(' 420988 ', ' 999999 '), false), 'stopped', 'the pid was reused by another process');
  assert.equal(runcStatus(STATE, STAT.replace(') S ', ') Z '), false), 'stopped', 'a zombie init has exited');
  assert.equal(runcStatus({ ...STATE, init_process_start: 420988 }, STAT, false), 'running', 'older runc writes a number');
});

it('finds the bundle label', () => {
  assert.equal(bundleOf(STATE), '/var/lib/minicri/sandboxes/abc');
  assert.equal(bundleOf({ init_process_pid: 1, init_process_start: 1 }), '');
});
