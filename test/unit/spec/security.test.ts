import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FailedPrecondition, InvalidArgument } from '../../../core/errors.js';
import { applyOpts, baseSpec } from '../../../oci/runtime/spec/opts.js';
import {
  apparmorProfileName, chooseProfile, refuseSelinuxLabels, DEFAULT_MASKED_PATHS, DEFAULT_READONLY_PATHS, parseSeccompProfile,
  seccompProfileFor, withApparmorProfile, withDevices, withMaskedPaths, withNoNewPrivileges, withPrivileged, withSeccomp,
} from '../../../oci/runtime/spec/security.js';
import { apparmorFacts, hostFacts } from './fixtures.js';

const devices = hostFacts().devices;

describe('masked and read-only paths', () => {
  it('none when the config gives none (procMount Unmasked, as containerd and CRI-O read it)', () => {
    const s = applyOpts(baseSpec('/r'), [withMaskedPaths([], [])]);
    assert.deepEqual(s.linux?.maskedPaths, []);
    assert.deepEqual(s.linux?.readonlyPaths, []);
  });
  it('the defaults are what kubelet sends', () => {
    const s = applyOpts(baseSpec('/r'), [withMaskedPaths(DEFAULT_MASKED_PATHS, DEFAULT_READONLY_PATHS)]);
    assert.ok(s.linux?.maskedPaths?.includes('/proc/kcore') && s.linux?.readonlyPaths?.includes('/proc/sys'));
  });
  it('uses the config\'s lists when given', () => {
    const s = applyOpts(baseSpec('/r'), [withMaskedPaths(['/proc/x'], ['/proc/y'])]);
    assert.deepEqual(s.linux?.maskedPaths, ['/proc/x']);
    assert.deepEqual(s.linux?.readonlyPaths, ['/proc/y']);
  });
});

describe('withDevices', () => {
  it('adds a device node and an allow rule with the requested access', () => {
    const s = applyOpts(baseSpec('/r'), [withDevices([{ host_path: '/dev/fuse', container_path: '/dev/fuse', permissions: 'rw' }], devices)]);
    assert.deepEqual(s.linux?.devices, [{ path: '/dev/fuse', type: 'c', major: 10, minor: 229, fileMode: 0o666, uid: 0, gid: 0 }]);
    assert.deepEqual(s.linux?.resources?.devices, [
      { allow: false, access: 'rwm' },
      { allow: true, type: 'c', major: 10, minor: 229, access: 'rw' },
    ]);
  });
  it('maps a host directory to every device below it', () => {
    const s = applyOpts(baseSpec('/r'), [withDevices([{ host_path: '/dev/snd', container_path: '/dev/sound', permissions: 'rwm' }], devices)]);
    assert.deepEqual(s.linux?.devices?.map((d) => d.path), ['/dev/sound/pcmC0D0p', '/dev/sound/controlC0']);
  });
  it('defaults the container path and permissions', () => {
    const s = applyOpts(baseSpec('/r'), [withDevices([{ host_path: '/dev/fuse', container_path: '', permissions: '' }], devices)]);
    assert.equal(s.linux?.devices?.[0]?.path, '/dev/fuse');
    assert.equal(s.linux?.resources?.devices?.[1]?.access, 'rwm');
  });
  it('refuses unknown devices and bad permissions', () => {
    assert.throws(() => withDevices([{ host_path: '/dev/nope', container_path: '/dev/nope', permissions: 'r' }], devices)(baseSpec('/r')), /does not exist/);
    assert.throws(() => withDevices([{ host_path: '/dev/fuse', container_path: '/dev/fuse', permissions: 'rx' }], devices)(baseSpec('/r')), InvalidArgument);
    assert.throws(() => withDevices([{ host_path: '/dev/fuse', container_path: '/dev/fuse', permissions: 'rr' }], devices)(baseSpec('/r')), InvalidArgument);
  });
});

describe('withPrivileged', () => {
  it('gives every host device, all device access and no masked paths', () => {
    const s = applyOpts(baseSpec('/r'), [withMaskedPaths([], []), withPrivileged(devices)]);
    assert.equal(s.linux?.devices?.length, 3);
    assert.deepEqual(s.linux?.resources?.devices, [{ allow: true, access: 'rwm' }]);
    assert.deepEqual(s.linux?.maskedPaths, []);
    assert.deepEqual(s.linux?.readonlyPaths, []);
  });
});

describe('chooseProfile', () => {
  const p = (profile_type: 'RuntimeDefault' | 'Unconfined' | 'Localhost', localhost_ref = '') => ({ profile_type, localhost_ref });
  it('maps the structured field', () => {
    assert.deepEqual(chooseProfile('seccomp', p('RuntimeDefault'), ''), { kind: 'runtime-default' });
    assert.deepEqual(chooseProfile('seccomp', p('Unconfined'), 'runtime/default'), { kind: 'unconfined' });
    assert.deepEqual(chooseProfile('seccomp', p('Localhost', '/p.json'), ''), { kind: 'localhost', ref: '/p.json' });
  });
  it('refuses inconsistent structured fields', () => {
    assert.throws(() => chooseProfile('seccomp', p('Localhost'), ''), InvalidArgument);
    assert.throws(() => chooseProfile('seccomp', p('RuntimeDefault', '/x'), ''), InvalidArgument);
  });
  it('maps legacy strings', () => {
    assert.deepEqual(chooseProfile('seccomp', null, 'runtime/default'), { kind: 'runtime-default' });
    assert.deepEqual(chooseProfile('seccomp', null, 'docker/default'), { kind: 'runtime-default' });
    assert.deepEqual(chooseProfile('seccomp', null, 'unconfined'), { kind: 'unconfined' });
    assert.deepEqual(chooseProfile('seccomp', null, 'localhost//var/lib/kubelet/seccomp/a.json'), { kind: 'localhost', ref: '/var/lib/kubelet/seccomp/a.json' });
    assert.throws(() => chooseProfile('seccomp', null, 'localhost/'), InvalidArgument);
    assert.throws(() => chooseProfile('seccomp', null, 'strict'), InvalidArgument);
  });
  it('nothing is unconfined for seccomp and the runtime default for AppArmor', () => {
    assert.deepEqual(chooseProfile('seccomp', null, ''), { kind: 'unconfined' });
    assert.deepEqual(chooseProfile('apparmor', null, ''), { kind: 'runtime-default' });
  });
});

describe('seccompProfileFor / parseSeccompProfile', () => {
  const host = { arch: 'x64', kernelRelease: '6.1.0' };
  it('unconfined is no filter, RuntimeDefault the default profile', () => {
    assert.equal(seccompProfileFor({ kind: 'unconfined' }, [], host), undefined);
    assert.equal(seccompProfileFor({ kind: 'runtime-default' }, [], host)?.defaultAction, 'SCMP_ACT_ERRNO');
  });
  it('Localhost parses the profile text the edge read', () => {
    const text = JSON.stringify({
      defaultAction: 'SCMP_ACT_ALLOW',
      archMap: [{ architecture: 'SCMP_ARCH_X86_64', subArchitectures: ['SCMP_ARCH_X86'] }],
      syscalls: [{ names: ['keyctl'], action: 'SCMP_ACT_ERRNO', errnoRet: 1, comment: 'dropped' }, { name: 'bpf', action: 'SCMP_ACT_ERRNO' }],
    });
    const p = seccompProfileFor({ kind: 'localhost', ref: '/p.json' }, [], { ...host, seccompProfiles: { '/p.json': text } });
    assert.deepEqual(p, {
      defaultAction: 'SCMP_ACT_ALLOW',
      architectures: ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86'],
      syscalls: [{ names: ['keyctl'], action: 'SCMP_ACT_ERRNO', errnoRet: 1 }, { names: ['bpf'], action: 'SCMP_ACT_ERRNO' }],
    });
  });
  it('refuses a missing or broken Localhost profile', () => {
    assert.throws(() => seccompProfileFor({ kind: 'localhost', ref: '/p.json' }, [], host), /not found/);
    assert.throws(() => parseSeccompProfile('/p', '{'), /not JSON/);
    assert.throws(() => parseSeccompProfile('/p', '{"defaultAction":"ALLOW"}'), /not a seccomp action/);
    assert.throws(() => parseSeccompProfile('/p', '{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"action":"SCMP_ACT_ALLOW"}]}'), /no names/);
    assert.throws(() => parseSeccompProfile('/p', '{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["x"],"action":"SCMP_ACT_ALLOW","args":[{"index":0}]}]}'), /args\[0\]/);
  });
  it('keeps syscall argument filters', () => {
    const p = parseSeccompProfile('/p', JSON.stringify({
      defaultAction: 'SCMP_ACT_ERRNO',
      syscalls: [{ names: ['personality'], action: 'SCMP_ACT_ALLOW', args: [{ index: 0, value: 8, valueTwo: 0, op: 'SCMP_CMP_EQ' }] }],
    }));
    assert.deepEqual(p.syscalls?.[0]?.args, [{ index: 0, value: 8, valueTwo: 0, op: 'SCMP_CMP_EQ' }]);
  });
  it('withSeccomp sets and clears', () => {
    const s = applyOpts(baseSpec('/r'), [withSeccomp({ defaultAction: 'SCMP_ACT_LOG' })]);
    assert.equal(s.linux?.seccomp?.defaultAction, 'SCMP_ACT_LOG');
    withSeccomp(undefined)(s);
    assert.equal(s.linux?.seccomp, undefined);
  });
});

describe('AppArmor', () => {
  const node = apparmorFacts('k8s-nginx');
  it('applies the runtime default or a loaded named profile when the host has AppArmor', () => {
    assert.equal(apparmorProfileName({ kind: 'runtime-default' }, false, node), 'minicri-default');
    assert.equal(apparmorProfileName({ kind: 'localhost', ref: 'k8s-nginx' }, false, node), 'k8s-nginx');
    assert.equal(apparmorProfileName({ kind: 'localhost', ref: 'localhost/k8s-nginx' }, false, node), 'k8s-nginx');
    assert.equal(apparmorProfileName({ kind: 'unconfined' }, false, node), undefined);
  });
  it('privileged: no default profile, but a named one', () => {
    assert.equal(apparmorProfileName({ kind: 'runtime-default' }, true, node), undefined);
    assert.equal(apparmorProfileName({ kind: 'localhost', ref: 'k8s-nginx' }, true, node), 'k8s-nginx');
  });
  it('refuses a named profile the kernel does not hold, saying how to load it', () => {
    assert.throws(() => apparmorProfileName({ kind: 'localhost', ref: 'k8s-other' }, false, node), (err: Error) => err instanceof InvalidArgument
      && err.message === 'AppArmor profile "k8s-other" is not loaded on this node: load it with "apparmor_parser -r <file>" '
        + '(the file that defines profile k8s-other; it then shows in /sys/kernel/security/apparmor/profiles), or use RuntimeDefault');
  });
  it('refuses RuntimeDefault when the default profile is not loaded, with the reason start found', () => {
    const failed = { ...node, loaded: new Set(['k8s-nginx']), defaultMissing: 'apparmor_parser -r /run/minicri/apparmor/minicri-default.next failed: syntax error' };
    assert.throws(() => apparmorProfileName({ kind: 'runtime-default' }, false, failed), (err: Error) => err instanceof FailedPrecondition
      && /default profile "minicri-default", which is not loaded on this node: apparmor_parser -r .* failed: syntax error$/.test(err.message));
    // Unconfined and privileged pods do not need it.
    assert.equal(apparmorProfileName({ kind: 'unconfined' }, false, failed), undefined);
    assert.equal(apparmorProfileName({ kind: 'runtime-default' }, true, failed), undefined);
  });
  it('without AppArmor: defaults mean nothing, a named profile is refused', () => {
    assert.equal(apparmorProfileName({ kind: 'runtime-default' }, false, undefined), undefined);
    assert.equal(apparmorProfileName({ kind: 'unconfined' }, false, undefined), undefined);
    assert.throws(() => apparmorProfileName({ kind: 'localhost', ref: 'x' }, false, undefined), /not enabled/);
  });
  it('withApparmorProfile and withNoNewPrivileges', () => {
    const s = applyOpts(baseSpec('/r'), [withApparmorProfile('p'), withNoNewPrivileges(true)]);
    assert.equal(s.process?.apparmorProfile, 'p');
    assert.equal(s.process?.noNewPrivileges, true);
  });
});

describe('SELinux labels', () => {
  const spc = { user: '', role: '', type: 'spc_t', level: '' };
  it('are ignored on a node without SELinux', () => {
    refuseSelinuxLabels(false, spc, [{ container_path: '/d', selinux_relabel: true }]);
  });
  it('are refused on a node with SELinux, naming what was asked', () => {
    assert.throws(() => refuseSelinuxLabels(true, { user: 'system_u', role: '', type: 'spc_t', level: 's0:c1' }), (err: Error) => err instanceof FailedPrecondition
      && /^the request sets selinux_options \(user "system_u", type "spc_t", level "s0:c1"\), but SELinux is enabled/.test(err.message));
    assert.throws(() => refuseSelinuxLabels(true, null, [{ container_path: '/a', selinux_relabel: false }, { container_path: '/d', selinux_relabel: true }]),
      (err: Error) => err instanceof FailedPrecondition && /selinux_relabel on the mount at "\/d"/.test(err.message));
  });
  it('empty options and no relabel pass on a node with SELinux', () => {
    refuseSelinuxLabels(true, { user: '', role: '', type: '', level: '' }, [{ container_path: '/a', selinux_relabel: false }]);
    refuseSelinuxLabels(true, null);
  });
});
