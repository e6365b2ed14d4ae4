// buildContainerSpec: CRI ContainerConfig + its PodSandboxConfig → OCI runtime spec of an app
// container that lives in the pod's namespaces and cgroup.
import type { ContainerConfig__Output } from '../../../gen/runtime/v1/ContainerConfig.js';
import type { PodSandboxConfig__Output } from '../../../gen/runtime/v1/PodSandboxConfig.js';
import { InvalidArgument } from '../../../core/errors.js';
import { containerAnnotations, withAnnotations } from './annotations.js';
import { DEFAULT_CAPABILITIES, resolveCapabilities, withCapabilities } from './capabilities.js';
import { withCdiEdits, type CdiEditsToApply } from './cdi.js';
import { withCgroupNamespace } from './cgroupns.js';
import { withCgroupsPath, type CgroupDriver } from './cgroups.js';
import { confinementFor, podNamespaceModes, requireId, userFor, type ImageInfo } from './common.js';
import type { HostFacts } from './host.js';
import { parseMountInfo } from './mountinfo.js';
import {
  DEV_SHM, imageVolumeMounts, podFileMounts, withBindMounts, withDefaultMounts, withReadonlyRootfs, withWritableSysfs,
} from './mounts.js';
import { withImageVolumes, type ImageVolumeMount } from './image-volumes.js';
import { containerNamespaces, nsPath, withNamespaces, type NamespaceModes } from './namespaces.js';
import { applyOpts, baseSpec, type SpecOpt } from './opts.js';
import { withHostname } from './pod.js';
import {
  checkExecSize, processArgs, processCwd, processEnv, withArgs, withCwd, withEnv, withRlimits, withTerminal,
} from './process.js';
import { int64, withOomScoreAdj, withResources } from './resources.js';
import {
  refuseSelinuxLabels, withApparmorProfile, withDevices, withMaskedPaths, withNoNewPrivileges, withPrivileged, withSeccomp,
} from './security.js';
import type { POSIXRlimit, Spec } from './types.js';
import { withUser } from './user.js';
import { podUserNamespace, withUserNamespace } from './userns.js';

export interface SandboxInfo {
  /** The pause container's init pid: its namespaces are the pod's. */
  pausePid: number;
  netnsPath?: string;
  hostsPath?: string;
  resolvPath?: string;
  hostnamePath?: string;
  /** The pod's /dev/shm on the host; a private tmpfs when absent. */
  shmPath?: string;
}

export interface ContainerSpecInput {
  id: string;
  sandboxId: string;
  config: ContainerConfig__Output;
  sandboxConfig: PodSandboxConfig__Output;
  image: ImageInfo;
  rootfs: string;
  sandbox: SandboxInfo;
  host: HostFacts;
  cgroupDriver: CgroupDriver;
  /** Host directories for the image's anonymous volumes, keyed by volume path (see imageVolumesToCreate). */
  volumeDirs?: Record<string, string>;
  /** Rlimits the runtime is configured to set; none by default. */
  rlimits?: POSIXRlimit[];
  /** Image volumes, mounted on the host by the edge (the config's image mounts are left out of config.mounts). */
  imageVolumes?: readonly ImageVolumeMount[];
  /** The edits of the container's CDI devices, resolved by the edge (device nodes completed from the host). */
  cdi?: readonly CdiEditsToApply[];
}

/** The ordered list of opts for an app container; buildContainerSpec applies it. */
export function containerSpecOpts(input: ContainerSpecInput): SpecOpt[] {
  const { config, sandboxConfig, host } = input;
  requireId('container id', input.id);
  requireId('sandbox id', input.sandboxId);
  if (!config.metadata?.name) throw new InvalidArgument('container config has no metadata name: set metadata.name');
  const podMeta = sandboxConfig.metadata;
  if (!podMeta) throw new InvalidArgument('sandbox config has no metadata: set metadata name, namespace and uid');

  const sc = config.linux?.security_context ?? null;
  const podSc = sandboxConfig.linux?.security_context ?? null;
  const privileged = sc?.privileged ?? false;
  if (privileged && !podSc?.privileged) {
    throw new InvalidArgument(`container "${config.metadata.name}" is privileged but its pod is not: mark the pod privileged too`);
  }
  if ((sc?.capabilities?.add_ambient_capabilities.length ?? 0) > 0) {
    throw new InvalidArgument('ambient capabilities are not supported by this runtime: remove add_ambient_capabilities');
  }
  refuseSelinuxLabels(host.selinux ?? false, sc?.selinux_options, config.mounts);

  const podModes = podNamespaceModes(sandboxConfig);
  const userns = podUserNamespace(sandboxConfig);
  const modes: NamespaceModes = { ...podModes, pid: sc?.namespace_options?.pid ?? podModes.pid };
  const hostNetwork = modes.network === 'NODE';
  const hostIpc = modes.ipc === 'NODE';
  const readonlyRootfs = sc?.readonly_rootfs ?? false;

  // Privileged means every capability of the bounding set, whatever add/drop say.
  const caps = privileged
    ? resolveCapabilities([], ['ALL'], [], host.boundingCaps)
    : resolveCapabilities(
      DEFAULT_CAPABILITIES,
      sc?.capabilities?.add_capabilities ?? [],
      sc?.capabilities?.drop_capabilities ?? [],
      host.boundingCaps,
    );

  const user = userFor(sc, input.image.config, host);
  const { seccomp, apparmor } = confinementFor(sc, caps, host);

  const podFiles = podFileMounts(
    {
      hostsPath: input.sandbox.hostsPath,
      resolvPath: input.sandbox.resolvPath,
      hostnamePath: input.sandbox.hostnamePath,
      shmPath: hostIpc ? DEV_SHM : input.sandbox.shmPath,
    },
    config.mounts,
    readonlyRootfs,
  );
  const volumes = imageVolumeMounts(Object.keys(input.image.config.Volumes ?? {}), config.mounts, input.volumeDirs ?? {});
  const hostname = sandboxConfig.hostname;
  const resources = config.linux?.resources ?? null;
  const argv = processArgs(config.command, config.args, input.image.config);
  const env = processEnv(hostname, input.image.config.Env ?? [], config.envs);
  checkExecSize(argv, env);

  return [
    withArgs(argv),
    withEnv(env),
    withCwd(processCwd(config.working_dir, input.image.config)),
    withTerminal(config.tty),
    withUser(user),
    withCapabilities(caps),
    withNoNewPrivileges(sc?.no_new_privs ?? false),
    withRlimits(input.rlimits ?? []),
    withDefaultMounts(),
    withBindMounts([...podFiles, ...volumes, ...config.mounts], {
      mountinfo: parseMountInfo(host.mountinfo),
      recursiveReadOnly: host.recursiveReadOnly ?? false,
    }),
    withImageVolumes(input.imageVolumes ?? []),
    withReadonlyRootfs(readonlyRootfs),
    withMaskedPaths(sc?.masked_paths ?? [], sc?.readonly_paths ?? []),
    ...(privileged ? [withPrivileged(host.devices), withWritableSysfs()] : [withDevices(config.devices, host.devices)]),
    withSeccomp(seccomp),
    withApparmorProfile(apparmor),
    // CDI edits come after what the config asked for (as the CDI reference runtimes apply them).
    withCdiEdits(input.cdi ?? []),
    withNamespaces(
      containerNamespaces(modes, { pausePid: input.sandbox.pausePid, netnsPath: input.sandbox.netnsPath, targetPid: host.targetPid }),
    ),
    // The pause's user namespace: every container of the pod shares its mappings.
    withUserNamespace(userns, userns ? nsPath(input.sandbox.pausePid, 'user') : undefined),
    withCgroupNamespace(host.cgroupNamespace ?? false),
    // Without its own UTS namespace the container would rename the node.
    withHostname(hostNetwork ? undefined : hostname),
    withCgroupsPath(input.cgroupDriver, sandboxConfig.linux?.cgroup_parent ?? '', input.id),
    withResources(resources, host.swapAccounting ?? true),
    // Always set: inherited, it would be the daemon's own (-999 under the systemd unit), and the OOM killer would
    // take the runtime before a pod that asked for nothing.
    withOomScoreAdj(resources ? int64('oom_score_adj', resources.oom_score_adj) : 0, host.oomScoreAdjMin),
    withAnnotations(
      config.annotations,
      containerAnnotations(
        { sandboxId: input.sandboxId, name: podMeta.name, namespace: podMeta.namespace, uid: podMeta.uid },
        config.metadata.name,
        input.image.name,
      ),
    ),
  ];
}

/**
 * The OCI spec for an app container. Throws InvalidArgument naming the offending field for bad
 * input. Privileged containers get every host device and capability, writable sysfs/cgroupfs and
 * no seccomp or AppArmor; config devices are then redundant and ignored.
 */
export function buildContainerSpec(input: ContainerSpecInput): Spec {
  return applyOpts(baseSpec(input.rootfs), containerSpecOpts(input));
}
