import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgument } from '../../../core/errors.js';
import { containerNamespaces, pauseNamespaces } from '../../../oci/runtime/spec/namespaces.js';

const POD = { network: 'POD', pid: 'POD', ipc: 'POD' } as const;

describe('pauseNamespaces', () => {
  it('creates mount, UTS, IPC, PID and joins the netns', () => {
    assert.deepEqual(pauseNamespaces(POD, '/run/netns/x'), [
      { type: 'mount' }, { type: 'network', path: '/run/netns/x' }, { type: 'uts' }, { type: 'ipc' }, { type: 'pid' },
    ]);
  });
  it('host network keeps the host network and UTS; host PID/IPC likewise', () => {
    assert.deepEqual(pauseNamespaces({ network: 'NODE', pid: 'NODE', ipc: 'NODE' }, undefined), [{ type: 'mount' }]);
  });
  it('needs a netns path unless host network', () => {
    assert.throws(() => pauseNamespaces(POD, undefined), InvalidArgument);
  });
});

describe('containerNamespaces', () => {
  const ctx = { pausePid: 42, netnsPath: '/run/netns/x' };
  it('POD: joins the pause\'s network, UTS, IPC and PID', () => {
    assert.deepEqual(containerNamespaces(POD, ctx), [
      { type: 'mount' },
      { type: 'network', path: '/run/netns/x' },
      { type: 'uts', path: '/proc/42/ns/uts' },
      { type: 'ipc', path: '/proc/42/ns/ipc' },
      { type: 'pid', path: '/proc/42/ns/pid' },
    ]);
  });
  it('falls back to the pause\'s netns without a path', () => {
    assert.deepEqual(containerNamespaces(POD, { pausePid: 42 })[1], { type: 'network', path: '/proc/42/ns/net' });
  });
  it('CONTAINER: a new PID namespace', () => {
    assert.deepEqual(containerNamespaces({ ...POD, pid: 'CONTAINER' }, ctx).at(-1), { type: 'pid' });
  });
  it('NODE: no PID namespace entry', () => {
    assert.ok(!containerNamespaces({ ...POD, pid: 'NODE' }, ctx).some((n) => n.type === 'pid'));
  });
  it('TARGET: the target container\'s PID namespace', () => {
    assert.deepEqual(containerNamespaces({ ...POD, pid: 'TARGET' }, { ...ctx, targetPid: 77 }).at(-1), { type: 'pid', path: '/proc/77/ns/pid' });
    assert.throws(() => containerNamespaces({ ...POD, pid: 'TARGET' }, ctx), /target container pid/);
  });
  it('host network and IPC: no entries', () => {
    assert.deepEqual(containerNamespaces({ network: 'NODE', pid: 'POD', ipc: 'NODE' }, ctx), [
      { type: 'mount' }, { type: 'pid', path: '/proc/42/ns/pid' },
    ]);
  });
  it('refuses a bad pause pid', () => {
    assert.throws(() => containerNamespaces(POD, { pausePid: 0 }), InvalidArgument);
  });
});
