// Facts about the node that spec building needs but must not read itself: the edge gathers
// them (from /proc, /dev, uname, the rootfs...) and passes them in.
import type { ApparmorFacts, HostDevice } from './security.js';

export interface HostFacts {
  /** The container's own /etc/passwd and /etc/group text (from its rootfs), if present. */
  passwd?: string;
  group?: string;
  /** /proc/self/mountinfo of the daemon: decides whether shared/slave propagation is possible. */
  mountinfo: string;
  /** The daemon's own oom_score_adj: no container may go below it. */
  oomScoreAdjMin: number;
  /** The daemon's capability bounding set: what "ALL" and privileged mean on this node. */
  boundingCaps: string[];
  /** Device nodes under the host's /dev. */
  devices: HostDevice[];
  /** AppArmor, when the node enforces it; without it no profile is applied and a named one is refused. */
  apparmor?: ApparmorFacts;
  /** SELinux is enabled on this node (/sys/fs/selinux/enforce exists): label requests are refused, not dropped. */
  selinux?: boolean;
  /** Localhost seccomp profiles the edge read, keyed by the requested localhost_ref. */
  seccompProfiles?: Record<string, string>;
  /** For PID namespace mode TARGET: the target container's init pid. */
  targetPid?: number;
  /** The node has the unified cgroup hierarchy (v2): app containers get a private cgroup namespace. */
  cgroupNamespace?: boolean;
  /** Node's process.arch; defaults to the running one. */
  arch?: string;
  /** uname -r; unknown is treated as an old kernel by the default seccomp profile. */
  kernelRelease?: string;
  /** The memory cgroup accounts swap (memory.memsw.* / memory.swap.max exist); default true. */
  swapAccounting?: boolean;
  /** runc and the kernel support recursive read-only ("rro") bind mounts. */
  recursiveReadOnly?: boolean;
}
