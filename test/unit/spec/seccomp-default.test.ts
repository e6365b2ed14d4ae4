import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defaultSeccompProfile } from '../../../oci/runtime/spec/seccomp-default.js';
import type { LinuxSeccomp } from '../../../oci/runtime/spec/types.js';

const allowed = (p: LinuxSeccomp): Set<string> =>
  new Set(p.syscalls?.filter((s) => s.action === 'SCMP_ACT_ALLOW' && !s.args).flatMap((s) => s.names));

describe('defaultSeccompProfile', () => {
  const base = defaultSeccompProfile({ capabilities: ['CAP_CHOWN', 'CAP_SYS_CHROOT'], arch: 'x64', kernelRelease: '6.1.0' });
  it('denies by default with EPERM on the host architectures', () => {
    assert.equal(base.defaultAction, 'SCMP_ACT_ERRNO');
    assert.equal(base.defaultErrnoRet, 1);
    assert.deepEqual(base.architectures, ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32']);
  });
  it('allows ordinary syscalls and blocks dangerous ones', () => {
    const a = allowed(base);
    for (const s of ['read', 'write', 'openat', 'execve', 'futex', 'clock_gettime', 'arch_prctl', 'chroot']) assert.ok(a.has(s), s);
    for (const s of ['keyctl', 'add_key', 'request_key', 'mount', 'umount2', 'unshare', 'setns', 'bpf', 'perf_event_open',
      'kexec_load', 'reboot', 'swapon', 'swapoff', 'init_module', 'finit_module', 'userfaultfd', 'open_by_handle_at', 'clone', 'clone3']) {
      assert.ok(!a.has(s), s);
    }
  });
  it('restricts clone to no namespace flags and makes clone3 fall back', () => {
    const clone = base.syscalls?.find((s) => s.names.includes('clone'));
    assert.deepEqual(clone?.args, [{ index: 0, value: 0x7e020000, valueTwo: 0, op: 'SCMP_CMP_MASKED_EQ' }]);
    assert.deepEqual(base.syscalls?.find((s) => s.names.includes('clone3')), { names: ['clone3'], action: 'SCMP_ACT_ERRNO', errnoRet: 38 });
  });
  it('allows personality only for harmless values', () => {
    const values = base.syscalls?.filter((s) => s.names.includes('personality')).map((s) => s.args?.[0]?.value);
    assert.deepEqual(values, [0, 8, 0x20000, 0x20008, 0xffffffff]);
  });
  it('widens with capabilities', () => {
    const admin = allowed(defaultSeccompProfile({ capabilities: ['CAP_SYS_ADMIN'], arch: 'x64', kernelRelease: '6.1.0' }));
    for (const s of ['mount', 'umount2', 'unshare', 'setns', 'clone', 'clone3', 'bpf']) assert.ok(admin.has(s), s);
    assert.ok(!admin.has('chroot'));
    assert.ok(allowed(defaultSeccompProfile({ capabilities: ['CAP_SYS_TIME'], arch: 'x64' })).has('settimeofday'));
    assert.ok(allowed(defaultSeccompProfile({ capabilities: ['CAP_DAC_READ_SEARCH'], arch: 'x64' })).has('open_by_handle_at'));
  });
  it('allows ptrace only from kernel 4.8 or with CAP_SYS_PTRACE', () => {
    assert.ok(allowed(base).has('ptrace'));
    assert.ok(!allowed(defaultSeccompProfile({ capabilities: [], arch: 'x64', kernelRelease: '4.4.0' })).has('ptrace'));
    assert.ok(!allowed(defaultSeccompProfile({ capabilities: [], arch: 'x64' })).has('ptrace'));
    assert.ok(allowed(defaultSeccompProfile({ capabilities: ['CAP_SYS_PTRACE'], arch: 'x64', kernelRelease: '4.4.0' })).has('ptrace'));
  });
  it('knows arm64', () => {
    const p = defaultSeccompProfile({ capabilities: [], arch: 'arm64' });
    assert.deepEqual(p.architectures, ['SCMP_ARCH_AARCH64', 'SCMP_ARCH_ARM']);
    assert.ok(!allowed(p).has('arch_prctl'));
  });
});
