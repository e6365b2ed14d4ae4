import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FailedPrecondition, InvalidArgument } from '../../../core/errors.js';
import { buildPauseSpec } from '../../../oci/runtime/spec/pause.js';
import { DEFAULT_MASKED_PATHS, DEFAULT_READONLY_PATHS } from '../../../oci/runtime/spec/security.js';
import { apparmorFacts, hostFacts, pauseInput, resources, sandboxConfig } from './fixtures.js';

describe('buildPauseSpec', () => {
  it('builds the pod\'s pause spec', () => {
    const s = buildPauseSpec(pauseInput({
      config: sandboxConfig({ annotations: { a: 'b' }, linux: { ...sandboxConfig().linux!, sysctls: { 'kernel.shm_rmid_forced': '1', 'net.core.somaxconn': '512' } } }),
    }));
    assert.deepEqual(s.process?.args, ['/pause']);
    assert.deepEqual(s.process?.user, { uid: 65535, gid: 65535, additionalGids: [65535] });
    assert.equal(s.process?.noNewPrivileges, true);
    assert.equal(s.process?.oomScoreAdj, -500); // -998 clamped to the daemon's -500
    assert.equal(s.hostname, 'web-0');
    assert.deepEqual(s.linux?.namespaces, [
      { type: 'mount' }, { type: 'network', path: '/var/run/netns/minicri-5a4db0c' }, { type: 'uts' }, { type: 'ipc' }, { type: 'pid' },
    ]);
    assert.deepEqual(s.linux?.sysctl, { 'kernel.shm_rmid_forced': '1' });
    assert.equal(s.linux?.cgroupsPath, '/kubepods/besteffort/poduid-1/5a4db0c');
    assert.deepEqual(s.linux?.resources?.cpu, { shares: 2 });
    assert.deepEqual(s.mounts?.find((m) => m.destination === '/dev/shm')?.options, ['rbind', 'ro', 'nosuid', 'nodev', 'noexec']);
    assert.equal(s.annotations?.['io.kubernetes.cri.container-type'], 'sandbox');
    assert.equal(s.annotations?.['io.kubernetes.cri.sandbox-log-directory'], '/var/log/pods/default_web_uid-1');
    assert.equal(s.annotations?.['io.kubernetes.cri.image-name'], 'registry.k8s.io/pause:3.10');
    assert.equal(s.annotations?.a, 'b');
    assert.equal(s.root?.readonly, false);
    assert.equal(buildPauseSpec(pauseInput({ rootfsShared: true })).root?.readonly, true);
  });

  it('uses run_as_user/run_as_group, the oom floor and pod resources', () => {
    const config = sandboxConfig({}, { run_as_user: { value: '1234' }, run_as_group: { value: '5678' }, readonly_rootfs: true });
    config.linux!.resources = resources({ cpu_quota: '10000', cpu_period: '100000' });
    const s = buildPauseSpec(pauseInput({ config, host: hostFacts({ oomScoreAdjMin: -1000, passwd: undefined, group: undefined }) }));
    assert.deepEqual(s.process?.user, { uid: 1234, gid: 5678, additionalGids: [5678] });
    assert.equal(s.process?.oomScoreAdj, -998);
    assert.deepEqual(s.linux?.resources?.cpu, { shares: 2, quota: 10000, period: 100000 });
    assert.equal(s.root?.readonly, true);
  });

  it('host network/PID/IPC: only a mount namespace, no hostname, no IPC sysctls allowed', () => {
    const ns = { network: 'NODE', pid: 'NODE', ipc: 'NODE', target_id: '', userns_options: null } as const;
    const s = buildPauseSpec(pauseInput({ netnsPath: undefined, config: sandboxConfig({}, { namespace_options: ns }) }));
    assert.deepEqual(s.linux?.namespaces, [{ type: 'mount' }]);
    assert.equal(s.hostname, undefined);
    const hostIpc = sandboxConfig({}, { namespace_options: ns });
    hostIpc.linux!.sysctls = { 'kernel.msgmax': '1' };
    assert.throws(() => buildPauseSpec(pauseInput({
      netnsPath: undefined,
      config: hostIpc,
    })), /host IPC/);
  });

  it('seccomp per the sandbox security context; privileged drops it and the masks', () => {
    const rd = { profile_type: 'RuntimeDefault', localhost_ref: '' } as const;
    assert.equal(buildPauseSpec(pauseInput({ config: sandboxConfig({}, { seccomp: rd }) })).linux?.seccomp?.defaultAction, 'SCMP_ACT_ERRNO');
    const p = buildPauseSpec(pauseInput({ config: sandboxConfig({}, { seccomp: rd, privileged: true }) }));
    assert.equal(p.linux?.seccomp, undefined);
    assert.deepEqual(p.linux?.maskedPaths, []);
    assert.ok(!p.mounts?.find((m) => m.destination === '/sys')?.options?.includes('ro'));
  });

  it('keeps the default masks: the pod\'s containers choose theirs', () => {
    const s = buildPauseSpec(pauseInput());
    assert.deepEqual(s.linux?.maskedPaths, DEFAULT_MASKED_PATHS);
    assert.deepEqual(s.linux?.readonlyPaths, DEFAULT_READONLY_PATHS);
  });

  it('AppArmor per the sandbox security context', () => {
    const host = hostFacts({ apparmor: apparmorFacts('k8s-pod') });
    const profile = (over: Parameters<typeof sandboxConfig>[1]) => buildPauseSpec(pauseInput({ config: sandboxConfig({}, over), host })).process?.apparmorProfile;
    assert.equal(profile({}), 'minicri-default');
    assert.equal(profile({ apparmor: { profile_type: 'Unconfined', localhost_ref: '' } }), undefined);
    assert.equal(profile({ apparmor: { profile_type: 'Localhost', localhost_ref: 'k8s-pod' } }), 'k8s-pod');
    assert.equal(profile({ privileged: true }), undefined);
  });

  it('refuses pod SELinux options on a node with SELinux, ignores them elsewhere', () => {
    const config = sandboxConfig({}, { selinux_options: { user: '', role: '', type: '', level: 's0:c123,c456' } });
    assert.ok(buildPauseSpec(pauseInput({ config })));
    assert.throws(() => buildPauseSpec(pauseInput({ config, host: hostFacts({ selinux: true }) })),
      (err: Error) => err instanceof FailedPrecondition && /selinux_options \(level "s0:c123,c456"\)/.test(err.message));
  });

  it('copes with an absent linux section', () => {
    const s = buildPauseSpec(pauseInput({ config: sandboxConfig({ linux: null }) }));
    assert.equal(s.linux?.cgroupsPath, '/minicri/5a4db0c');
    assert.equal(s.linux?.sysctl, undefined);
  });

  it('systemd driver', () => {
    const s = buildPauseSpec(pauseInput({
      cgroupDriver: 'systemd',
      config: sandboxConfig({ linux: { ...sandboxConfig().linux!, cgroup_parent: 'kubepods-burstable-pod9.slice' } }),
    }));
    assert.equal(s.linux?.cgroupsPath, 'kubepods-burstable-pod9.slice:minicri:5a4db0c');
  });

  it('rejects bad input with InvalidArgument', () => {
    const bad = [
      pauseInput({ sandboxId: '' }),
      pauseInput({ config: sandboxConfig({ metadata: null }) }),
      pauseInput({ config: sandboxConfig({ metadata: { name: 'x', uid: '', namespace: 'ns', attempt: 0 } }) }),
      pauseInput({ netnsPath: undefined }),
      pauseInput({ image: { name: 'p', config: {} } }),
      pauseInput({ config: sandboxConfig({ hostname: '-x' }) }),
      pauseInput({ config: sandboxConfig({ linux: { ...sandboxConfig().linux!, sysctls: { 'vm.overcommit_memory': '1' } } }) }),
      pauseInput({ cgroupDriver: 'systemd' }),
    ];
    for (const [i, input] of bad.entries()) assert.throws(() => buildPauseSpec(input), InvalidArgument, `case ${i}`);
  });
});
