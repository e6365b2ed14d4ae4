// Public surface of the spec builder: the two builders, their inputs, and the helpers the edge
// needs (log path, secure join, volumes to create, oom clamp, net sysctls).
export { buildContainerSpec, containerSpecOpts, type ContainerSpecInput, type SandboxInfo } from './container.js';
export type { ImageInfo } from './common.js';
export { buildPauseSpec, pauseSpecOpts, type PauseSpecInput, type PauseHostFacts, PAUSE_OOM_SCORE_ADJ } from './pause.js';
export type { HostFacts } from './host.js';
export type { ApparmorFacts, HostDevice } from './security.js';
export type { ImageConfig } from './process.js';
export type { CgroupDriver } from './cgroups.js';
export { cgroupsPath, SYSTEMD_SCOPE_PREFIX } from './cgroups.js';
export { containerLogPath } from './logpath.js';
export { defaultMountRoots, imageVolumesToCreate } from './mounts.js';
export { clampOomScoreAdj } from './resources.js';
export { splitSysctls, type PodSysctls } from './pod.js';
export { podNamespaceModes } from './common.js';
export {
  checkUsernsMounts, hostIdOverlap, HOST_IDS, idmapKernelProblem, podRootOnHost, podUserNamespace, stageUsernsMounts,
  type IdRange, type PodUserns, type StagedMount,
} from './userns.js';
export { localhostSeccompRef } from './common.js';
export type { CdiEditsToApply } from './cdi.js';
export { imageSubPath, type ImageVolumeMount } from './image-volumes.js';
export { ANNOTATION } from './annotations.js';
export * from './types.js';
