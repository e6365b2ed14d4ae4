// buildPauseSpec: the pod's infrastructure ("pause") container. It only holds the pod's
// namespaces, so its spec is the container one minus everything app-specific.
import type { PodSandboxConfig__Output } from '../../../gen/runtime/v1/PodSandboxConfig.js';
import { InvalidArgument } from '../../../core/errors.js';
import { sandboxAnnotations, withAnnotations } from './annotations.js';
import { DEFAULT_CAPABILITIES, withCapabilities } from './capabilities.js';
import { withCgroupsPath, type CgroupDriver } from './cgroups.js';
import { confinementFor, podNamespaceModes, requireId, userFor, type ImageInfo } from './common.js';
import type { HostFacts } from './host.js';
import { withDefaultMounts, withPodShm, withReadonlyRootfs, withWritableSysfs } from './mounts.js';
import { pauseNamespaces, withNamespaces } from './namespaces.js';
import { applyOpts, baseSpec, type SpecOpt } from './opts.js';
import { splitSysctls, withHostname, withSysctls } from './pod.js';
import { processArgs, processEnv, withArgs, withEnv } from './process.js';
import { withCpuShares, withOomScoreAdj, withResources } from './resources.js';
import {
  DEFAULT_MASKED_PATHS, DEFAULT_READONLY_PATHS, refuseSelinuxLabels, withApparmorProfile, withMaskedPaths, withNoNewPrivileges,
  withSeccomp, withoutMaskedPaths,
} from './security.js';
import type { Spec } from './types.js';
import { withUser } from './user.js';
import { podUserNamespace, withUserNamespace } from './userns.js';

/** The pause process should be the last thing the OOM killer picks in its pod. */
export const PAUSE_OOM_SCORE_ADJ = -998;
/** cgroup v1's minimum cpu.shares: the pause process needs no CPU. */
export const PAUSE_CPU_SHARES = 2;

export type PauseHostFacts = Omit<HostFacts, 'targetPid' | 'recursiveReadOnly'>;

export interface PauseSpecInput {
  sandboxId: string;
  config: PodSandboxConfig__Output;
  /** The pause image. */
  image: ImageInfo;
  rootfs: string;
  /** The root filesystem is shared (the pause image's own layer) and must stay read-only. */
  rootfsShared?: boolean;
  /** The pod's network namespace; none for host networking. */
  netnsPath?: string;
  /** The pod's /dev/shm on the host; bound read-only (the pause never writes it). */
  shmPath?: string;
  cgroupDriver: CgroupDriver;
  host: PauseHostFacts;
}

export function pauseSpecOpts(input: PauseSpecInput): SpecOpt[] {
  const { config, host } = input;
  requireId('sandbox id', input.sandboxId);
  const meta = config.metadata;
  if (!meta?.name || !meta.namespace || !meta.uid) {
    throw new InvalidArgument('sandbox config metadata needs name, namespace and uid');
  }
  const sc = config.linux?.security_context ?? null;
  const privileged = sc?.privileged ?? false;
  refuseSelinuxLabels(host.selinux ?? false, sc?.selinux_options);
  const modes = podNamespaceModes(config);
  const userns = podUserNamespace(config);
  const sysctls = splitSysctls(config.linux?.sysctls ?? {}, modes.ipc === 'NODE', modes.network === 'NODE');
  const caps = DEFAULT_CAPABILITIES;

  const user = userFor(sc, input.image.config, host);
  const { seccomp, apparmor } = confinementFor(sc, caps, host);
  const resources = config.linux?.resources ?? null;

  return [
    withArgs(processArgs([], [], input.image.config)),
    withEnv(processEnv('', input.image.config.Env ?? [], [])),
    withUser(user),
    withCapabilities(caps),
    withNoNewPrivileges(true),
    withDefaultMounts(),
    withPodShm(input.shmPath),
    withReadonlyRootfs(input.rootfsShared || (sc?.readonly_rootfs ?? false)),
    // The pause runs no workload: it keeps the default masks whatever the pod's containers ask for.
    withMaskedPaths(DEFAULT_MASKED_PATHS, DEFAULT_READONLY_PATHS),
    ...(privileged ? [withoutMaskedPaths(), withWritableSysfs()] : []),
    withSeccomp(seccomp),
    withApparmorProfile(apparmor),
    withNamespaces(pauseNamespaces(modes, input.netnsPath, { newNetns: !!userns })),
    withUserNamespace(userns),
    // Without its own UTS namespace (host network) the hostname is the node's and must not be set.
    withHostname(modes.network === 'NODE' ? undefined : config.hostname),
    withSysctls(sysctls.ipc),
    withCgroupsPath(input.cgroupDriver, config.linux?.cgroup_parent ?? '', input.sandboxId),
    withCpuShares(PAUSE_CPU_SHARES),
    withResources(resources, host.swapAccounting ?? true),
    withOomScoreAdj(PAUSE_OOM_SCORE_ADJ, host.oomScoreAdjMin),
    withAnnotations(
      config.annotations,
      sandboxAnnotations(
        { sandboxId: input.sandboxId, name: meta.name, namespace: meta.namespace, uid: meta.uid },
        config.log_directory,
        input.image.name,
      ),
    ),
  ];
}

/** The OCI spec for a pod's pause container. Throws InvalidArgument for bad input. */
export function buildPauseSpec(input: PauseSpecInput): Spec {
  return applyOpts(baseSpec(input.rootfs), pauseSpecOpts(input));
}
