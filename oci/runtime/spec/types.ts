// The parts of the OCI runtime specification (config.json, Linux) that minicri writes.
// Field names follow the spec's JSON exactly so a Spec serialises straight to config.json.

export const OCI_VERSION = '1.0.2';

export interface Spec {
  ociVersion: string;
  process?: Process;
  root?: Root;
  hostname?: string;
  mounts?: Mount[];
  annotations?: Record<string, string>;
  linux?: Linux;
  hooks?: Hooks;
}

/** A program runc runs at a point of the container's life (CDI devices bring them). */
export interface Hook {
  path: string;
  args?: string[];
  env?: string[];
  timeout?: number;
}

export interface Hooks {
  prestart?: Hook[];
  createRuntime?: Hook[];
  createContainer?: Hook[];
  startContainer?: Hook[];
  poststart?: Hook[];
  poststop?: Hook[];
}

export interface Root {
  path: string;
  readonly?: boolean;
}

export interface Process {
  terminal?: boolean;
  user: User;
  args?: string[];
  env?: string[];
  cwd: string;
  capabilities?: LinuxCapabilities;
  rlimits?: POSIXRlimit[];
  noNewPrivileges?: boolean;
  apparmorProfile?: string;
  oomScoreAdj?: number;
  selinuxLabel?: string;
}

export interface User {
  uid: number;
  gid: number;
  umask?: number;
  additionalGids?: number[];
}

export interface LinuxCapabilities {
  bounding?: string[];
  effective?: string[];
  inheritable?: string[];
  permitted?: string[];
  ambient?: string[];
}

export interface POSIXRlimit {
  type: string;
  hard: number;
  soft: number;
}

export interface Mount {
  destination: string;
  type?: string;
  source?: string;
  options?: string[];
}

export type NamespaceType = 'pid' | 'network' | 'mount' | 'ipc' | 'uts' | 'user' | 'cgroup';

export interface LinuxNamespace {
  type: NamespaceType;
  path?: string;
}

export interface Linux {
  sysctl?: Record<string, string>;
  intelRdt?: { closID?: string; l3CacheSchema?: string; memBwSchema?: string };
  resources?: LinuxResources;
  cgroupsPath?: string;
  namespaces?: LinuxNamespace[];
  uidMappings?: LinuxIDMapping[];
  gidMappings?: LinuxIDMapping[];
  devices?: LinuxDevice[];
  seccomp?: LinuxSeccomp;
  rootfsPropagation?: string;
  maskedPaths?: string[];
  readonlyPaths?: string[];
  mountLabel?: string;
}

export interface LinuxIDMapping {
  containerID: number;
  hostID: number;
  size: number;
}

export interface LinuxDevice {
  path: string;
  type: string;
  major: number;
  minor: number;
  fileMode?: number;
  uid?: number;
  gid?: number;
}

export interface LinuxDeviceCgroup {
  allow: boolean;
  type?: string;
  major?: number;
  minor?: number;
  access?: string;
}

export interface LinuxMemory {
  limit?: number;
  reservation?: number;
  swap?: number;
  swappiness?: number;
  disableOOMKiller?: boolean;
}

export interface LinuxCPU {
  shares?: number;
  quota?: number;
  period?: number;
  cpus?: string;
  mems?: string;
}

export interface LinuxPids {
  limit: number;
}

export interface LinuxHugepageLimit {
  pageSize: string;
  limit: number;
}

export interface LinuxResources {
  devices?: LinuxDeviceCgroup[];
  memory?: LinuxMemory;
  cpu?: LinuxCPU;
  pids?: LinuxPids;
  hugepageLimits?: LinuxHugepageLimit[];
  unified?: Record<string, string>;
}

export type SeccompAction =
  | 'SCMP_ACT_KILL'
  | 'SCMP_ACT_KILL_PROCESS'
  | 'SCMP_ACT_KILL_THREAD'
  | 'SCMP_ACT_TRAP'
  | 'SCMP_ACT_ERRNO'
  | 'SCMP_ACT_TRACE'
  | 'SCMP_ACT_ALLOW'
  | 'SCMP_ACT_LOG'
  | 'SCMP_ACT_NOTIFY';

export type SeccompOperator =
  | 'SCMP_CMP_NE'
  | 'SCMP_CMP_LT'
  | 'SCMP_CMP_LE'
  | 'SCMP_CMP_EQ'
  | 'SCMP_CMP_GE'
  | 'SCMP_CMP_GT'
  | 'SCMP_CMP_MASKED_EQ';

export interface LinuxSeccompArg {
  index: number;
  value: number;
  valueTwo?: number;
  op: SeccompOperator;
}

export interface LinuxSyscall {
  names: string[];
  action: SeccompAction;
  errnoRet?: number;
  args?: LinuxSeccompArg[];
}

export interface LinuxSeccomp {
  defaultAction: SeccompAction;
  defaultErrnoRet?: number;
  architectures?: string[];
  flags?: string[];
  syscalls?: LinuxSyscall[];
}
