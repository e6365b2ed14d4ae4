import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FailedPrecondition, InvalidArgument } from '../../../core/errors.js';
import type { SecurityProfile__Output } from '../../../gen/runtime/v1/SecurityProfile.js';
import { DEFAULT_CAPABILITIES } from '../../../oci/runtime/spec/capabilities.js';
import { buildContainerSpec } from '../../../oci/runtime/spec/container.js';
import { DEFAULT_MASKED_PATHS } from '../../../oci/runtime/spec/security.js';
import {
  apparmorFacts, BOUNDING, containerConfig, containerInput, hostFacts, mount, resources, sandboxConfig, securityContext,
} from './fixtures.js';

describe('buildContainerSpec', () => {
  it('builds a complete default spec', () => {
    const s = buildContainerSpec(containerInput());
    assert.equal(s.ociVersion, '1.0.2');
    assert.deepEqual(s.root, { path: '/var/lib/minicri/containers/c0ffee/rootfs', readonly: false });
    assert.deepEqual(s.process?.args, ['sh']);
    assert.deepEqual(s.process?.env, ['PATH=/bin', 'HOSTNAME=web-0', 'LANG=C']);
    assert.equal(s.process?.cwd, '/');
    assert.equal(s.process?.terminal, false);
    assert.deepEqual(s.process?.user, { uid: 0, gid: 0, additionalGids: [0, 10] });
    assert.deepEqual(s.process?.capabilities?.effective, [...DEFAULT_CAPABILITIES]);
    assert.equal(s.process?.noNewPrivileges, false);
    assert.equal(s.process?.rlimits, undefined);
    assert.equal(s.process?.oomScoreAdj, 0); // not the daemon's own, which it would inherit
    assert.equal(s.hostname, 'web-0');
    assert.equal(s.linux?.cgroupsPath, '/kubepods/besteffort/poduid-1/c0ffee');
    assert.deepEqual(s.linux?.maskedPaths, DEFAULT_MASKED_PATHS);
    assert.equal(s.linux?.seccomp, undefined); // nothing requested: unconfined
    assert.equal(s.process?.apparmorProfile, undefined);
    assert.deepEqual(s.linux?.namespaces?.map((n) => `${n.type}:${n.path ?? ''}`), [
      'mount:', 'network:/var/run/netns/minicri-5a4db0c', 'uts:/proc/4242/ns/uts', 'ipc:/proc/4242/ns/ipc', 'pid:/proc/4242/ns/pid',
    ]);
    assert.deepEqual(s.mounts?.map((m) => `${m.destination}=${m.type}`), [
      '/proc=proc', '/dev=tmpfs', '/dev/pts=devpts', '/dev/mqueue=mqueue', '/sys=sysfs', '/sys/fs/cgroup=cgroup',
      '/etc/hostname=bind', '/etc/hosts=bind', '/etc/resolv.conf=bind', '/dev/shm=bind',
    ]);
    assert.equal(s.mounts?.find((m) => m.destination === '/dev/shm')?.source, '/var/lib/minicri/sandboxes/5a4db0c/shm');
    assert.deepEqual(s.annotations, {
      'io.kubernetes.cri.container-type': 'container',
      'io.kubernetes.cri.sandbox-id': '5a4db0c',
      'io.kubernetes.cri.sandbox-name': 'web',
      'io.kubernetes.cri.sandbox-namespace': 'default',
      'io.kubernetes.cri.sandbox-uid': 'uid-1',
      'io.kubernetes.cri.container-name': 'app',
      'io.kubernetes.cri.image-name': 'docker.io/library/busybox:1.36',
    });
    assert.doesNotThrow(() => JSON.stringify(s));
  });

  it('applies process, user and security settings from the config', () => {
    const s = buildContainerSpec(containerInput({
      config: containerConfig(
        { command: ['/bin/app'], args: ['-v'], working_dir: '/srv', tty: true, envs: [{ key: 'LANG', value: Buffer.from('C.UTF-8') }], annotations: { team: 'a' } },
        {
          run_as_user: { value: '1000' }, run_as_group: { value: '3000' }, supplemental_groups: ['4000'], no_new_privs: true,
          readonly_rootfs: true, capabilities: { add_capabilities: ['NET_ADMIN'], drop_capabilities: ['ALL'], add_ambient_capabilities: [] },
          seccomp: { profile_type: 'RuntimeDefault', localhost_ref: '' },
        },
        resources({ cpu_shares: '256', memory_limit_in_bytes: '67108864', oom_score_adj: '-999' }),
      ),
    }));
    assert.deepEqual(s.process?.args, ['/bin/app', '-v']);
    assert.equal(s.process?.cwd, '/srv');
    assert.equal(s.process?.terminal, true);
    assert.ok(s.process?.env?.includes('LANG=C.UTF-8'));
    assert.deepEqual(s.process?.user, { uid: 1000, gid: 3000, additionalGids: [3000, 10, 44, 4000] });
    assert.deepEqual(s.process?.capabilities?.bounding, ['CAP_NET_ADMIN']);
    assert.equal(s.process?.noNewPrivileges, true);
    assert.equal(s.root?.readonly, true);
    assert.ok(s.mounts?.filter((m) => m.destination.startsWith('/etc/')).every((m) => m.options?.includes('ro')));
    assert.equal(s.linux?.seccomp?.defaultAction, 'SCMP_ACT_ERRNO');
    assert.deepEqual(s.linux?.resources?.cpu, { shares: 256 });
    assert.deepEqual(s.linux?.resources?.memory, { limit: 67108864, swap: 67108864 });
    assert.equal(s.process?.oomScoreAdj, -500); // clamped to the daemon's -500
    assert.equal(s.annotations?.team, 'a');
  });

  it('mounts: config mounts override pod files and defaults; image volumes get dirs', () => {
    const s = buildContainerSpec(containerInput({
      config: containerConfig({ mounts: [mount({ container_path: '/etc/hosts', host_path: '/k/hosts' }), mount({ container_path: '/data', host_path: '/h/data', readonly: true })] }),
      image: { name: 'img', config: { Cmd: ['sh'], Volumes: { '/data': {}, '/cache': {} } } },
      volumeDirs: { '/cache': '/var/lib/minicri/volumes/v1' },
    }));
    assert.equal(s.mounts?.find((m) => m.destination === '/etc/hosts')?.source, '/k/hosts');
    assert.equal(s.mounts?.filter((m) => m.destination === '/etc/hosts').length, 1);
    assert.deepEqual(s.mounts?.find((m) => m.destination === '/data')?.options, ['rbind', 'rprivate', 'ro']);
    assert.equal(s.mounts?.find((m) => m.destination === '/cache')?.source, '/var/lib/minicri/volumes/v1');
  });

  it('refuses a propagation the host mount cannot give', () => {
    assert.throws(() => buildContainerSpec(containerInput({
      config: containerConfig({ mounts: [mount({ container_path: '/m', host_path: '/mnt/private/m', propagation: 'PROPAGATION_BIDIRECTIONAL' })] }),
    })), /Bidirectional/);
  });

  it('privileged: all caps and devices, writable sysfs, no masks, no seccomp/AppArmor', () => {
    const s = buildContainerSpec(containerInput({
      config: containerConfig({ devices: [{ host_path: '/dev/fuse', container_path: '/dev/fuse', permissions: 'rwm' }] }, {
        privileged: true, seccomp: { profile_type: 'RuntimeDefault', localhost_ref: '' }, apparmor: { profile_type: 'RuntimeDefault', localhost_ref: '' },
        capabilities: { add_capabilities: [], drop_capabilities: ['ALL'], add_ambient_capabilities: [] },
      }),
      sandboxConfig: sandboxConfig({}, { privileged: true }),
      host: hostFacts({ apparmor: apparmorFacts() }),
    }));
    assert.deepEqual(s.process?.capabilities?.bounding, BOUNDING);
    assert.equal(s.linux?.devices?.length, 3);
    assert.deepEqual(s.linux?.resources?.devices, [{ allow: true, access: 'rwm' }]);
    assert.deepEqual(s.linux?.maskedPaths, []);
    assert.deepEqual(s.linux?.readonlyPaths, []);
    assert.ok(!s.mounts?.find((m) => m.destination === '/sys')?.options?.includes('ro'));
    assert.ok(!s.mounts?.find((m) => m.destination === '/sys/fs/cgroup')?.options?.includes('ro'));
    assert.equal(s.linux?.seccomp, undefined);
    assert.equal(s.process?.apparmorProfile, undefined);
  });

  it('a privileged container needs a privileged pod', () => {
    assert.throws(() => buildContainerSpec(containerInput({ config: containerConfig({}, { privileged: true }) })), /pod is not/);
  });

  it('AppArmor RuntimeDefault by default when the host has it', () => {
    const s = buildContainerSpec(containerInput({ host: hostFacts({ apparmor: apparmorFacts() }) }));
    assert.equal(s.process?.apparmorProfile, 'minicri-default');
  });

  it('AppArmor per request field, on a node with AppArmor', () => {
    const host = hostFacts({ apparmor: apparmorFacts('k8s-nginx') });
    const profileOf = (over: Parameters<typeof securityContext>[0], privileged = false) => buildContainerSpec(containerInput({
      config: containerConfig({}, { privileged, ...over }),
      sandboxConfig: sandboxConfig({}, { privileged }),
      host,
    })).process?.apparmorProfile;
    const rd = { profile_type: 'RuntimeDefault', localhost_ref: '' } as const;
    const local = { profile_type: 'Localhost', localhost_ref: 'k8s-nginx' } as const;
    const unconfined = { profile_type: 'Unconfined', localhost_ref: '' } as const;
    assert.equal(profileOf({}), 'minicri-default');
    assert.equal(profileOf({ apparmor: rd }), 'minicri-default');
    assert.equal(profileOf({ apparmor: local }), 'k8s-nginx');
    assert.equal(profileOf({ apparmor: unconfined }), undefined);
    // The structured field wins over the deprecated string.
    assert.equal(profileOf({ apparmor: unconfined, apparmor_profile: 'localhost/k8s-nginx' }), undefined);
    assert.equal(profileOf({ apparmor_profile: 'localhost/k8s-nginx' }), 'k8s-nginx');
    assert.equal(profileOf({ apparmor_profile: 'runtime/default' }), 'minicri-default');
    assert.equal(profileOf({ apparmor_profile: 'unconfined' }), undefined);
    // Privileged: no default profile, but the one it names.
    assert.equal(profileOf({}, true), undefined);
    assert.equal(profileOf({ apparmor: rd }, true), undefined);
    assert.equal(profileOf({ apparmor: local }, true), 'k8s-nginx');
    assert.throws(() => profileOf({ apparmor: { profile_type: 'Localhost', localhost_ref: 'not-loaded' } }),
      (err: Error) => err instanceof InvalidArgument && /"not-loaded" is not loaded on this node: load it with "apparmor_parser -r <file>"/.test(err.message));
  });

  it('AppArmor on a node without it: no profile, a named one refused', () => {
    const build = (apparmor: SecurityProfile__Output | null) =>
      buildContainerSpec(containerInput({ config: containerConfig({}, { apparmor }), host: hostFacts() })).process?.apparmorProfile;
    assert.equal(build(null), undefined);
    assert.equal(build({ profile_type: 'RuntimeDefault', localhost_ref: '' }), undefined);
    assert.throws(() => build({ profile_type: 'Localhost', localhost_ref: 'k8s-nginx' }), /not enabled on this node/);
  });

  it('procMount Unmasked: empty lists mean no masks', () => {
    const s = buildContainerSpec(containerInput({ config: containerConfig({}, { masked_paths: [], readonly_paths: [] }) }));
    assert.deepEqual(s.linux?.maskedPaths, []);
    assert.deepEqual(s.linux?.readonlyPaths, []);
  });

  it('SELinux labels: refused where SELinux is enabled, ignored elsewhere', () => {
    const labelled = containerConfig({}, { selinux_options: { user: '', role: '', type: 'spc_t', level: '' } });
    const relabel = containerConfig({ mounts: [mount({ container_path: '/data', host_path: '/mnt/shared/data', selinux_relabel: true })] });
    for (const config of [labelled, relabel]) {
      assert.ok(buildContainerSpec(containerInput({ config })));
      assert.throws(() => buildContainerSpec(containerInput({ config, host: hostFacts({ selinux: true }) })),
        (err: Error) => err instanceof FailedPrecondition && /SELinux is enabled on this node and minicri does not apply SELinux labels/.test(err.message));
    }
    assert.throws(() => buildContainerSpec(containerInput({ config: labelled, host: hostFacts({ selinux: true }) })), /selinux_options \(type "spc_t"\)/);
    assert.throws(() => buildContainerSpec(containerInput({ config: relabel, host: hostFacts({ selinux: true }) })), /selinux_relabel on the mount at "\/data"/);
    // Nothing asked: nothing refused.
    assert.ok(buildContainerSpec(containerInput({ host: hostFacts({ selinux: true }) })));
  });

  it('seccomp Localhost and legacy path', () => {
    const text = '{"defaultAction":"SCMP_ACT_LOG"}';
    const s = buildContainerSpec(containerInput({
      config: containerConfig({}, { seccomp_profile_path: 'localhost//p.json' }),
      host: hostFacts({ seccompProfiles: { '/p.json': text } }),
    }));
    assert.deepEqual(s.linux?.seccomp, { defaultAction: 'SCMP_ACT_LOG' });
    const u = buildContainerSpec(containerInput({ config: containerConfig({}, { seccomp: { profile_type: 'Unconfined', localhost_ref: '' }, seccomp_profile_path: 'runtime/default' }) }));
    assert.equal(u.linux?.seccomp, undefined);
  });

  it('host network, IPC and PID: no such namespaces, no hostname, host /dev/shm', () => {
    const s = buildContainerSpec(containerInput({
      sandboxConfig: sandboxConfig({}, { namespace_options: { network: 'NODE', pid: 'NODE', ipc: 'NODE', target_id: '', userns_options: null } }),
      config: containerConfig({}, { namespace_options: { network: 'NODE', pid: 'NODE', ipc: 'NODE', target_id: '', userns_options: null } }),
    }));
    assert.deepEqual(s.linux?.namespaces, [{ type: 'mount' }]);
    assert.equal(s.hostname, undefined);
    assert.equal(s.mounts?.find((m) => m.destination === '/dev/shm')?.source, '/dev/shm');
  });

  it('PID modes: container-private and target', () => {
    const pidNs = (pid: 'CONTAINER' | 'TARGET', targetPid?: number) => buildContainerSpec(containerInput({
      config: containerConfig({}, { namespace_options: { network: 'POD', pid, ipc: 'POD', target_id: 'other', userns_options: null } }),
      host: hostFacts({ targetPid }),
    })).linux?.namespaces?.find((n) => n.type === 'pid');
    assert.deepEqual(pidNs('CONTAINER'), { type: 'pid' });
    assert.deepEqual(pidNs('TARGET', 99), { type: 'pid', path: '/proc/99/ns/pid' });
  });

  it('systemd cgroup driver', () => {
    const s = buildContainerSpec(containerInput({
      cgroupDriver: 'systemd',
      sandboxConfig: sandboxConfig({ linux: { ...sandboxConfig().linux!, cgroup_parent: 'kubepods-besteffort-pod123.slice' } }),
    }));
    assert.equal(s.linux?.cgroupsPath, 'kubepods-besteffort-pod123.slice:minicri:c0ffee');
  });

  it('copes with absent linux sections', () => {
    const s = buildContainerSpec(containerInput({
      config: containerConfig({ linux: null }),
      sandboxConfig: sandboxConfig({ linux: null }),
    }));
    assert.equal(s.linux?.cgroupsPath, '/minicri/c0ffee');
    assert.equal(s.linux?.namespaces?.length, 5);
    assert.deepEqual(s.process?.capabilities?.bounding, [...DEFAULT_CAPABILITIES]);
  });

  it('rejects bad input with InvalidArgument', () => {
    const bad = [
      containerInput({ id: '' }),
      containerInput({ id: '../x' }),
      containerInput({ config: containerConfig({ metadata: null }) }),
      containerInput({ image: { name: 'x', config: {} } }),
      containerInput({ config: containerConfig({ working_dir: 'rel' }) }),
      // CDI edits arrive resolved; one whose device node lacks its numbers is refused.
      containerInput({ cdi: [{ owner: 'CDI device "vendor.com/gpu=0"', edits: { deviceNodes: [{ path: '/dev/gpu0' }] } }] }),
      containerInput({ config: containerConfig({}, {}, resources({ cpu_shares: '-3' })) }),
      containerInput({ config: containerConfig({}, { capabilities: { add_capabilities: ['BOGUS'], drop_capabilities: [], add_ambient_capabilities: [] } }) }),
      containerInput({ config: containerConfig({}, { capabilities: { add_capabilities: [], drop_capabilities: [], add_ambient_capabilities: ['NET_RAW'] } }) }),
      containerInput({ config: containerConfig({}, { run_as_username: 'ghost' }) }),
      containerInput({ config: containerConfig({}, { seccomp_profile_path: 'localhost//missing.json' }) }),
      containerInput({ config: containerConfig({ devices: [{ host_path: '/dev/nope', container_path: '/dev/nope', permissions: 'r' }] }) }),
      containerInput({ sandboxConfig: sandboxConfig({ hostname: 'bad_host' }) }),
      containerInput({ sandboxConfig: sandboxConfig({ linux: { ...sandboxConfig().linux!, cgroup_parent: 'relative' } }) }),
      containerInput({ sandboxConfig: sandboxConfig({}, { namespace_options: { network: 'POD', pid: 'POD', ipc: 'POD', target_id: '', userns_options: { mode: 'POD', uids: [], gids: [] } } }) }),
    ];
    for (const [i, input] of bad.entries()) assert.throws(() => buildContainerSpec(input), InvalidArgument, `case ${i}`);
  });
});
