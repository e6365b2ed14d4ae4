// Builders for fully-defaulted CRI objects (as proto-loader hands them to us) and host facts.
import type { ContainerConfig__Output } from '../../../gen/runtime/v1/ContainerConfig.js';
import type { LinuxContainerResources__Output } from '../../../gen/runtime/v1/LinuxContainerResources.js';
import type { LinuxContainerSecurityContext__Output } from '../../../gen/runtime/v1/LinuxContainerSecurityContext.js';
import type { LinuxSandboxSecurityContext__Output } from '../../../gen/runtime/v1/LinuxSandboxSecurityContext.js';
import type { Mount__Output } from '../../../gen/runtime/v1/Mount.js';
import type { PodSandboxConfig__Output } from '../../../gen/runtime/v1/PodSandboxConfig.js';
import type { ContainerSpecInput } from '../../../oci/runtime/spec/container.js';
import type { HostFacts } from '../../../oci/runtime/spec/host.js';
import type { PauseSpecInput } from '../../../oci/runtime/spec/pause.js';
import { DEFAULT_MASKED_PATHS, DEFAULT_READONLY_PATHS, type ApparmorFacts } from '../../../oci/runtime/spec/security.js';

export function resources(over: Partial<LinuxContainerResources__Output> = {}): LinuxContainerResources__Output {
  return {
    cpu_period: '0', cpu_quota: '0', cpu_shares: '0', memory_limit_in_bytes: '0', oom_score_adj: '0',
    cpuset_cpus: '', cpuset_mems: '', hugepage_limits: [], unified: {}, memory_swap_limit_in_bytes: '0',
    ...over,
  };
}

export function securityContext(over: Partial<LinuxContainerSecurityContext__Output> = {}): LinuxContainerSecurityContext__Output {
  return {
    capabilities: null, privileged: false, namespace_options: null, selinux_options: null, run_as_user: null,
    run_as_username: '', readonly_rootfs: false, supplemental_groups: [], apparmor_profile: '', seccomp_profile_path: '',
    // kubelet's lists, which it sends unless the pod asks for procMount Unmasked.
    no_new_privs: false, run_as_group: null, masked_paths: [...DEFAULT_MASKED_PATHS], readonly_paths: [...DEFAULT_READONLY_PATHS],
    seccomp: null, apparmor: null,
    supplemental_groups_policy: 'Merge',
    ...over,
  };
}

export function sandboxSecurityContext(over: Partial<LinuxSandboxSecurityContext__Output> = {}): LinuxSandboxSecurityContext__Output {
  return {
    namespace_options: null, selinux_options: null, run_as_user: null, readonly_rootfs: false, supplemental_groups: [],
    privileged: false, seccomp_profile_path: '', run_as_group: null, seccomp: null, apparmor: null,
    supplemental_groups_policy: 'Merge',
    ...over,
  };
}

export function mount(over: Partial<Mount__Output> & { container_path: string; host_path: string }): Mount__Output {
  return {
    readonly: false, selinux_relabel: false, propagation: 'PROPAGATION_PRIVATE', uidMappings: [], gidMappings: [],
    recursive_read_only: false, image: null, image_sub_path: '',
    ...over,
  };
}

export function containerConfig(
  over: Partial<ContainerConfig__Output> = {},
  sc: Partial<LinuxContainerSecurityContext__Output> = {},
  res: LinuxContainerResources__Output | null = null,
): ContainerConfig__Output {
  return {
    metadata: { name: 'app', attempt: 0 },
    image: null,
    command: [], args: [], working_dir: '', envs: [], mounts: [], devices: [], labels: {}, annotations: {},
    log_path: 'app/0.log', stdin: false, stdin_once: false, tty: false,
    linux: { resources: res, security_context: securityContext(sc) },
    windows: null, CDI_devices: [], stop_signal: 'RUNTIME_DEFAULT',
    ...over,
  };
}

export function sandboxConfig(
  over: Partial<PodSandboxConfig__Output> = {},
  sc: Partial<LinuxSandboxSecurityContext__Output> = {},
): PodSandboxConfig__Output {
  return {
    metadata: { name: 'web', uid: 'uid-1', namespace: 'default', attempt: 0 },
    hostname: 'web-0',
    log_directory: '/var/log/pods/default_web_uid-1',
    dns_config: null, port_mappings: [], labels: {}, annotations: {},
    linux: {
      cgroup_parent: '/kubepods/besteffort/poduid-1',
      security_context: sandboxSecurityContext(sc),
      sysctls: {}, overhead: null, resources: null,
    },
    windows: null,
    ...over,
  };
}

// A host whose root is a shared mount and /mnt/private a private one.
export const MOUNTINFO = [
  '22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw',
  '23 22 0:21 / /proc rw,nosuid shared:12 - proc proc rw',
  '40 22 0:40 / /mnt/private rw,relatime - tmpfs tmpfs rw',
  '41 22 0:41 / /mnt/slave rw,relatime master:7 - tmpfs tmpfs rw',
].join('\n');

export const BOUNDING = [
  'CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FOWNER', 'CAP_FSETID', 'CAP_KILL', 'CAP_SETGID', 'CAP_SETUID', 'CAP_SETPCAP',
  'CAP_NET_BIND_SERVICE', 'CAP_NET_ADMIN', 'CAP_NET_RAW', 'CAP_SYS_CHROOT', 'CAP_SYS_ADMIN', 'CAP_SYS_PTRACE',
  'CAP_MKNOD', 'CAP_AUDIT_WRITE', 'CAP_SETFCAP',
];

export function hostFacts(over: Partial<HostFacts> = {}): HostFacts {
  return {
    passwd: 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/sbin/nologin\napp:x:1000:1000::/home/app:/bin/sh\n',
    group: 'root:x:0:\nwheel:x:10:app,root\napp:x:1000:\nvideo:x:44:app\nnogroup:x:65534:\n',
    mountinfo: MOUNTINFO,
    oomScoreAdjMin: -500,
    boundingCaps: BOUNDING,
    devices: [
      { path: '/dev/fuse', type: 'c', major: 10, minor: 229, fileMode: 0o666, uid: 0, gid: 0 },
      { path: '/dev/snd/pcmC0D0p', type: 'c', major: 116, minor: 16, fileMode: 0o660, uid: 0, gid: 29 },
      { path: '/dev/snd/controlC0', type: 'c', major: 116, minor: 0, fileMode: 0o660, uid: 0, gid: 29 },
    ],
    arch: 'x64',
    kernelRelease: '6.1.0-13-amd64',
    ...over,
  };
}

/** A node with AppArmor, minicri's profile loaded, and `loaded` besides. */
export function apparmorFacts(...loaded: string[]): ApparmorFacts {
  return { defaultProfile: 'minicri-default', defaultMissing: 'restart minicri to load it again', loaded: new Set(['minicri-default', ...loaded]) };
}

export function containerInput(over: Partial<ContainerSpecInput> = {}): ContainerSpecInput {
  return {
    id: 'c0ffee',
    sandboxId: '5a4db0c',
    config: containerConfig(),
    sandboxConfig: sandboxConfig(),
    image: { name: 'docker.io/library/busybox:1.36', config: { Cmd: ['sh'], Env: ['PATH=/bin', 'LANG=C'] } },
    rootfs: '/var/lib/minicri/containers/c0ffee/rootfs',
    sandbox: {
      pausePid: 4242,
      netnsPath: '/var/run/netns/minicri-5a4db0c',
      hostsPath: '/var/lib/minicri/sandboxes/5a4db0c/hosts',
      resolvPath: '/var/lib/minicri/sandboxes/5a4db0c/resolv.conf',
      hostnamePath: '/var/lib/minicri/sandboxes/5a4db0c/hostname',
      shmPath: '/var/lib/minicri/sandboxes/5a4db0c/shm',
    },
    host: hostFacts(),
    cgroupDriver: 'cgroupfs',
    ...over,
  };
}

export function pauseInput(over: Partial<PauseSpecInput> = {}): PauseSpecInput {
  return {
    sandboxId: '5a4db0c',
    config: sandboxConfig(),
    image: { name: 'registry.k8s.io/pause:3.10', config: { Entrypoint: ['/pause'], User: '65535:65535' } },
    rootfs: '/var/lib/minicri/sandboxes/5a4db0c/rootfs',
    netnsPath: '/var/run/netns/minicri-5a4db0c',
    shmPath: '/var/lib/minicri/sandboxes/5a4db0c/shm',
    cgroupDriver: 'cgroupfs',
    host: hostFacts({ passwd: undefined, group: undefined }),
    ...over,
  };
}
