// Which privileges of a restored process go beyond what the container's spec grants (CRIU restores them from its
// images, not from the spec).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { capabilityMask, parseProcStatus, privilegesBeyondSpec, type LivePrivileges } from '../../../oci/runtime/checkpoint-privileges.js';

const STATUS = `Name:\tsh
Uid:\t1000\t1000\t1000\t1000
Gid:\t1000\t1000\t1000\t1000
CapInh:\t0000000000000000
CapPrm:\t00000000a80425fb
CapEff:\t00000000a80425fb
CapBnd:\t00000000a80425fb
CapAmb:\t0000000000000000
NoNewPrivs:\t1
Seccomp:\t2
Seccomp_filters:\t1
`;

test('/proc/<pid>/status gives the capability sets, ids, no_new_privs and seccomp mode', () => {
  assert.deepEqual(parseProcStatus(STATUS), {
    capBnd: 0xa80425fbn, capEff: 0xa80425fbn, capPrm: 0xa80425fbn, uids: [1000, 1000, 1000, 1000], gids: [1000, 1000, 1000, 1000],
    noNewPrivs: true, seccomp: 2,
  });
  assert.equal(parseProcStatus('Name:\tsh\n'), undefined);
});

test('capability names become the kernel mask', () => {
  assert.equal(capabilityMask(['CAP_CHOWN', 'CAP_KILL', 'CAP_SYS_ADMIN']), (1n << 0n) | (1n << 5n) | (1n << 21n));
  assert.equal(capabilityMask(undefined), 0n);
});

const DEFAULT = ['CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FSETID', 'CAP_FOWNER', 'CAP_SETGID', 'CAP_SETUID', 'CAP_SETPCAP',
  'CAP_NET_BIND_SERVICE', 'CAP_KILL'];
const spec = (caps: string[], o: { uid?: number; nnp?: boolean; seccomp?: boolean } = {}) => ({
  process: {
    user: { uid: o.uid ?? 0, gid: o.uid ?? 0 }, cwd: '/', noNewPrivileges: o.nnp ?? false,
    capabilities: { bounding: caps, effective: caps, permitted: caps },
  },
  linux: o.seccomp ? { seccomp: { defaultAction: 'SCMP_ACT_ERRNO' as const } } : {},
});
const live = (caps: string[], o: Partial<LivePrivileges> = {}): LivePrivileges => {
  const m = capabilityMask(caps);
  return { capBnd: m, capEff: m, capPrm: m, uids: [0, 0, 0, 0], gids: [0, 0, 0, 0], noNewPrivs: false, seccomp: 0, ...o };
};

test('a process holding what the spec grants, or less, goes beyond nothing', () => {
  assert.deepEqual(privilegesBeyondSpec(live(DEFAULT), spec(DEFAULT)), []);
  assert.deepEqual(privilegesBeyondSpec(live(['CAP_KILL'], { uids: [1000, 1000, 1000, 1000] }), spec(DEFAULT)), [], 'dropped to another user');
  assert.deepEqual(privilegesBeyondSpec(live([], { noNewPrivs: true, seccomp: 2 }), spec([])), []);
});

test('capabilities the spec does not grant are named, per set', () => {
  const beyond = privilegesBeyondSpec(live([...DEFAULT, 'CAP_SYS_ADMIN'], { capEff: capabilityMask(DEFAULT) }), spec(DEFAULT));
  assert.deepEqual(beyond, ['bounding capabilities CAP_SYS_ADMIN that the request does not grant',
    'permitted capabilities CAP_SYS_ADMIN that the request does not grant']);
  assert.match(privilegesBeyondSpec(live(DEFAULT), spec([]))[0]!, /bounding capabilities CAP_CHOWN, CAP_DAC_OVERRIDE/);
});

test('root where the spec runs as a user, and no_new_privs or seccomp off where the spec has them, go beyond it', () => {
  assert.deepEqual(privilegesBeyondSpec(live([], { uids: [1000, 0, 1000, 0], gids: [1000, 1000, 1000, 1000] }), spec([], { uid: 1000 })),
    ['uids 1000 0 1000 0 where the request runs as 1000']);
  assert.deepEqual(privilegesBeyondSpec(live([], { seccomp: 2 }), spec([], { nnp: true })), ['no_new_privs off where the request sets it']);
  assert.deepEqual(privilegesBeyondSpec(live([], { noNewPrivs: true }), spec([], { seccomp: true })),
    ['no seccomp filter where the request has one']);
});
