import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Internal } from '../../../core/errors.js';
import type { ContainerRecord, SandboxRecord } from '../../../pod/records.js';
import {
  markContainerCreated, markContainerExited, markContainerLost, markContainerRunning, markNeverStarted, markSandboxNotReady,
  markSandboxReady, markStartFailed,
} from '../../../pod/state.js';

// Frozen: a transition must return the moved record and leave the one it was given as it was.
const container = (over: Partial<ContainerRecord> = {}) => Object.freeze({
  id: 'c1', state: 'CONTAINER_CREATED', startedAt: '0', finishedAt: '0', exitCode: 0, reason: '', message: '', ...over,
}) as ContainerRecord;
const sandbox = (over: Partial<SandboxRecord> = {}) =>
  Object.freeze({ id: 's1', state: 'SANDBOX_NOTREADY', creating: true, ...over }) as SandboxRecord;

describe('sandbox transitions', () => {
  it('becomes READY once, at the end of its creation', () => {
    const s = sandbox();
    const ready = markSandboxReady(s);
    assert.deepEqual(ready, { id: 's1', state: 'SANDBOX_READY' });
    assert.deepEqual([s.state, s.creating], ['SANDBOX_NOTREADY', true]);
    assert.throws(() => markSandboxReady(ready), Internal);
    assert.throws(() => markSandboxReady(markSandboxNotReady(ready)), /cannot become ready/);
  });
});

describe('container transitions', () => {
  it('CREATED → RUNNING → EXITED, with the exit recorded', () => {
    const c = container({ creating: true });
    const created = markContainerCreated(c, 7);
    assert.deepEqual([created.pid, 'creating' in created, c.creating], [7, false, true]);
    const running = markContainerRunning(created, '1000');
    assert.deepEqual([running.state, running.startedAt, created.state], ['CONTAINER_RUNNING', '1000', 'CONTAINER_CREATED']);
    const exited = markContainerExited(running, { exitCode: 3, finishedAt: new Date(0), oomKilled: false });
    assert.deepEqual([exited.state, exited.exitCode, exited.reason, exited.finishedAt], ['CONTAINER_EXITED', 3, 'Error', '1000']);
    const again = markContainerExited(exited, { exitCode: 0, finishedAt: new Date(5), oomKilled: true });
    assert.deepEqual([again.exitCode, again.reason, exited.reason], [0, 'OOMKilled', 'Error']);
  });

  it('an exit without conmon\'s status is 255, Unknown', () => {
    const c = markContainerExited(container({ state: 'CONTAINER_RUNNING' }), undefined);
    assert.deepEqual([c.exitCode, c.reason, c.message], [255, 'Unknown', 'the container stopped without an exit status from conmon']);
  });

  it('refuses the moves the lifecycle never makes', () => {
    assert.throws(() => markContainerRunning(container({ state: 'CONTAINER_EXITED' }), '1'),
      /cannot go from CONTAINER_EXITED to CONTAINER_RUNNING/);
    assert.throws(() => markContainerRunning(container({ state: 'CONTAINER_RUNNING' }), '1'), Internal);
    assert.throws(() => markNeverStarted(container({ state: 'CONTAINER_RUNNING' })), Internal);
    assert.throws(() => markContainerCreated(container({ state: 'CONTAINER_RUNNING', creating: true }), 1), Internal);
    assert.throws(() => markContainerCreated(container(), 1), /cannot finish its creation/);
  });

  it('a start that failed, a stop before the start and a lost container all end EXITED and never read as success', () => {
    const failed = markStartFailed(container(), 'runc said no');
    assert.deepEqual([failed.state, failed.exitCode, failed.reason, failed.message],
      ['CONTAINER_EXITED', 128, 'StartError', 'runc said no']);
    const never = markNeverStarted(container());
    assert.deepEqual([never.state, never.exitCode, never.reason], ['CONTAINER_EXITED', 255, 'Error']);
    const lost = markContainerLost(container({ state: 'CONTAINER_RUNNING' }), 'gone');
    assert.deepEqual([lost.state, lost.exitCode, lost.reason, lost.message], ['CONTAINER_EXITED', 255, 'Unknown', 'gone']);
  });
});
