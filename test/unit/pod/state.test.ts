import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Internal } from '../../../core/errors.js';
import type { ContainerRecord, SandboxRecord } from '../../../pod/records.js';
import {
  markContainerCreated, markContainerExited, markContainerLost, markContainerRunning, markNeverStarted, markSandboxNotReady, markSandboxReady, markStartFailed,
} from '../../../pod/state.js';

const container = (over: Partial<ContainerRecord> = {}) => ({
  id: 'c1', state: 'CONTAINER_CREATED', startedAt: '0', finishedAt: '0', exitCode: 0, reason: '', message: '', ...over,
}) as ContainerRecord;
const sandbox = (over: Partial<SandboxRecord> = {}) => ({ id: 's1', state: 'SANDBOX_NOTREADY', creating: true, ...over }) as SandboxRecord;

describe('sandbox transitions', () => {
  it('becomes READY once, at the end of its creation', () => {
    const s = sandbox();
    markSandboxReady(s);
    assert.deepEqual([s.state, s.creating], ['SANDBOX_READY', undefined]);
    assert.throws(() => markSandboxReady(s), Internal);
    markSandboxNotReady(s);
    assert.throws(() => markSandboxReady(s), /cannot become ready/);
  });
});

describe('container transitions', () => {
  it('CREATED → RUNNING → EXITED, with the exit recorded', () => {
    const c = container({ creating: true });
    markContainerCreated(c, 7);
    assert.deepEqual([c.pid, c.creating], [7, undefined]);
    markContainerRunning(c, '1000');
    assert.equal(c.state, 'CONTAINER_RUNNING');
    markContainerExited(c, { exitCode: 3, finishedAt: new Date(0), oomKilled: false });
    assert.deepEqual([c.state, c.exitCode, c.reason, c.finishedAt], ['CONTAINER_EXITED', 3, 'Error', '1000']);
    markContainerExited(c, { exitCode: 0, finishedAt: new Date(5), oomKilled: true });
    assert.deepEqual([c.exitCode, c.reason], [0, 'OOMKilled']);
  });

  it('an exit without conmon\'s status is 255, Unknown', () => {
    const c = container({ state: 'CONTAINER_RUNNING' });
    markContainerExited(c, undefined);
    assert.deepEqual([c.exitCode, c.reason], [255, 'Unknown']);
  });

  it('refuses the moves the lifecycle never makes', () => {
    assert.throws(() => markContainerRunning(container({ state: 'CONTAINER_EXITED' }), '1'), /cannot go from CONTAINER_EXITED to CONTAINER_RUNNING/);
    assert.throws(() => markContainerRunning(container({ state: 'CONTAINER_RUNNING' }), '1'), Internal);
    assert.throws(() => markNeverStarted(container({ state: 'CONTAINER_RUNNING' })), Internal);
    assert.throws(() => markContainerCreated(container({ state: 'CONTAINER_RUNNING', creating: true }), 1), Internal);
    assert.throws(() => markContainerCreated(container(), 1), /cannot finish its creation/);
  });

  it('a start that failed, a stop before the start and a lost container all end EXITED and never read as success', () => {
    const failed = container();
    markStartFailed(failed, 'runc said no');
    assert.deepEqual([failed.state, failed.exitCode, failed.reason, failed.message], ['CONTAINER_EXITED', 128, 'StartError', 'runc said no']);
    const never = container();
    markNeverStarted(never);
    assert.deepEqual([never.state, never.exitCode, never.reason], ['CONTAINER_EXITED', 255, 'Error']);
    const lost = container({ state: 'CONTAINER_RUNNING' });
    markContainerLost(lost, 'gone');
    assert.deepEqual([lost.state, lost.exitCode, lost.reason, lost.message], ['CONTAINER_EXITED', 255, 'Unknown', 'gone']);
  });
});
