// minicri's RuntimeDefault seccomp profile: an allow-list that returns EPERM for everything
// else. What stays blocked for an ordinary container is what lets it reach outside itself: the
// kernel keyring (keyctl, add_key, request_key), mounting and new namespaces without
// CAP_SYS_ADMIN (mount, unshare, setns, clone with namespace flags), bpf, perf_event_open, module
// loading, kexec, reboot, swapon/swapoff, clock setting, userfaultfd, open_by_handle_at, ...
// Syscalls that need a capability are allowed only when the container holds it, mirroring what
// Docker and containerd ship, so a capability granted by the pod spec keeps working.
import type { LinuxSeccomp, LinuxSyscall } from './types.js';
import { versionAtLeast } from '../../../core/version.js';

const EPERM = 1;
const ENOSYS = 38;

/** Allowed for every container on every architecture. */
const ALWAYS: readonly string[] = [
  'accept', 'accept4', 'access', 'adjtimex', 'alarm', 'bind', 'brk', 'cachestat', 'capget', 'capset',
  'chdir', 'chmod', 'chown', 'chown32', 'clock_adjtime', 'clock_adjtime64', 'clock_getres',
  'clock_getres_time64', 'clock_gettime', 'clock_gettime64', 'clock_nanosleep', 'clock_nanosleep_time64',
  'close', 'close_range', 'connect', 'copy_file_range', 'creat', 'dup', 'dup2', 'dup3', 'epoll_create',
  'epoll_create1', 'epoll_ctl', 'epoll_ctl_old', 'epoll_pwait', 'epoll_pwait2', 'epoll_wait',
  'epoll_wait_old', 'eventfd', 'eventfd2', 'execve', 'execveat', 'exit', 'exit_group', 'faccessat',
  'faccessat2', 'fadvise64', 'fadvise64_64', 'fallocate', 'fanotify_mark', 'fchdir', 'fchmod', 'fchmodat',
  'fchmodat2', 'fchown', 'fchown32', 'fchownat', 'fcntl', 'fcntl64', 'fdatasync', 'fgetxattr', 'flistxattr',
  'flock', 'fork', 'fremovexattr', 'fsetxattr', 'fstat', 'fstat64', 'fstatat64', 'fstatfs', 'fstatfs64',
  'fsync', 'ftruncate', 'ftruncate64', 'futex', 'futex_requeue', 'futex_time64', 'futex_wait', 'futex_waitv',
  'futex_wake', 'futimesat', 'get_robust_list', 'get_thread_area', 'getcpu', 'getcwd', 'getdents',
  'getdents64', 'getegid', 'getegid32', 'geteuid', 'geteuid32', 'getgid', 'getgid32', 'getgroups',
  'getgroups32', 'getitimer', 'getpeername', 'getpgid', 'getpgrp', 'getpid', 'getppid', 'getpriority',
  'getrandom', 'getresgid', 'getresgid32', 'getresuid', 'getresuid32', 'getrlimit', 'getrusage', 'getsid',
  'getsockname', 'getsockopt', 'gettid', 'gettimeofday', 'getuid', 'getuid32', 'getxattr',
  'inotify_add_watch', 'inotify_init', 'inotify_init1', 'inotify_rm_watch', 'io_cancel', 'io_destroy',
  'io_getevents', 'io_pgetevents', 'io_pgetevents_time64', 'io_setup', 'io_submit', 'ioctl', 'ioprio_get',
  'ioprio_set', 'ipc', 'kill', 'landlock_add_rule', 'landlock_create_ruleset', 'landlock_restrict_self',
  'lchown', 'lchown32', 'lgetxattr', 'link', 'linkat', 'listen', 'listxattr', 'llistxattr', '_llseek',
  'lremovexattr', 'lseek', 'lsetxattr', 'lstat', 'lstat64', 'madvise', 'map_shadow_stack', 'membarrier',
  'memfd_create', 'memfd_secret', 'mincore', 'mkdir', 'mkdirat', 'mknod', 'mknodat', 'mlock', 'mlock2',
  'mlockall', 'mmap', 'mmap2', 'mprotect', 'mq_getsetattr', 'mq_notify', 'mq_open', 'mq_timedreceive',
  'mq_timedreceive_time64', 'mq_timedsend', 'mq_timedsend_time64', 'mq_unlink', 'mremap', 'msgctl',
  'msgget', 'msgrcv', 'msgsnd', 'msync', 'munlock', 'munlockall', 'munmap', 'name_to_handle_at',
  'nanosleep', 'newfstatat', '_newselect', 'open', 'openat', 'openat2', 'pause', 'pidfd_open',
  'pidfd_send_signal', 'pipe', 'pipe2', 'pkey_alloc', 'pkey_free', 'pkey_mprotect', 'poll', 'ppoll',
  'ppoll_time64', 'prctl', 'pread64', 'preadv', 'preadv2', 'prlimit64', 'process_mrelease', 'pselect6',
  'pselect6_time64', 'pwrite64', 'pwritev', 'pwritev2', 'read', 'readahead', 'readlink', 'readlinkat',
  'readv', 'recv', 'recvfrom', 'recvmmsg', 'recvmmsg_time64', 'recvmsg', 'remap_file_pages', 'removexattr',
  'rename', 'renameat', 'renameat2', 'restart_syscall', 'rmdir', 'rseq', 'rt_sigaction', 'rt_sigpending',
  'rt_sigprocmask', 'rt_sigqueueinfo', 'rt_sigreturn', 'rt_sigsuspend', 'rt_sigtimedwait',
  'rt_sigtimedwait_time64', 'rt_tgsigqueueinfo', 'sched_get_priority_max', 'sched_get_priority_min',
  'sched_getaffinity', 'sched_getattr', 'sched_getparam', 'sched_getscheduler', 'sched_rr_get_interval',
  'sched_rr_get_interval_time64', 'sched_setaffinity', 'sched_setattr', 'sched_setparam',
  'sched_setscheduler', 'sched_yield', 'seccomp', 'select', 'semctl', 'semget', 'semop', 'semtimedop',
  'semtimedop_time64', 'send', 'sendfile', 'sendfile64', 'sendmmsg', 'sendmsg', 'sendto', 'set_robust_list',
  'set_thread_area', 'set_tid_address', 'setfsgid', 'setfsgid32', 'setfsuid', 'setfsuid32', 'setgid',
  'setgid32', 'setgroups', 'setgroups32', 'setitimer', 'setpgid', 'setpriority', 'setregid', 'setregid32',
  'setresgid', 'setresgid32', 'setresuid', 'setresuid32', 'setreuid', 'setreuid32', 'setrlimit', 'setsid',
  'setsockopt', 'setuid', 'setuid32', 'setxattr', 'shmat', 'shmctl', 'shmdt', 'shmget', 'shutdown',
  'sigaltstack', 'signalfd', 'signalfd4', 'sigprocmask', 'sigreturn', 'socket', 'socketcall', 'socketpair',
  'splice', 'stat', 'stat64', 'statfs', 'statfs64', 'statx', 'symlink', 'symlinkat', 'sync',
  'sync_file_range', 'syncfs', 'sysinfo', 'tee', 'tgkill', 'time', 'timer_create', 'timer_delete',
  'timer_getoverrun', 'timer_gettime', 'timer_gettime64', 'timer_settime', 'timer_settime64',
  'timerfd_create', 'timerfd_gettime', 'timerfd_gettime64', 'timerfd_settime', 'timerfd_settime64', 'times',
  'tkill', 'truncate', 'truncate64', 'ugetrlimit', 'umask', 'uname', 'unlink', 'unlinkat', 'utime',
  'utimensat', 'utimensat_time64', 'utimes', 'vfork', 'vmsplice', 'wait4', 'waitid', 'waitpid', 'write',
  'writev',
];

/** Per-architecture extras, keyed by Node's process.arch. */
const ARCHES: Readonly<Record<string, { architectures: string[]; syscalls: string[] }>> = {
  x64: { architectures: ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32'], syscalls: ['arch_prctl', 'modify_ldt'] },
  ia32: { architectures: ['SCMP_ARCH_X86'], syscalls: ['modify_ldt'] },
  arm64: {
    architectures: ['SCMP_ARCH_AARCH64', 'SCMP_ARCH_ARM'],
    syscalls: ['arm_fadvise64_64', 'arm_sync_file_range', 'sync_file_range2', 'breakpoint', 'cacheflush', 'set_tls'],
  },
  arm: {
    architectures: ['SCMP_ARCH_ARM'],
    syscalls: ['arm_fadvise64_64', 'arm_sync_file_range', 'sync_file_range2', 'breakpoint', 'cacheflush', 'set_tls'],
  },
};

/** Syscalls a capability unlocks. */
const BY_CAPABILITY: ReadonlyArray<[cap: string, names: string[]]> = [
  ['CAP_SYS_ADMIN', [
    'bpf', 'clone', 'clone3', 'fanotify_init', 'fsconfig', 'fsmount', 'fsopen', 'fspick', 'lookup_dcookie',
    'mount', 'mount_setattr', 'move_mount', 'open_tree', 'perf_event_open', 'quotactl', 'quotactl_fd',
    'setdomainname', 'sethostname', 'setns', 'syslog', 'umount', 'umount2', 'unshare',
  ]],
  ['CAP_DAC_READ_SEARCH', ['open_by_handle_at']],
  ['CAP_SYS_BOOT', ['reboot']],
  ['CAP_SYS_CHROOT', ['chroot']],
  ['CAP_SYS_MODULE', ['delete_module', 'init_module', 'finit_module']],
  ['CAP_SYS_PACCT', ['acct']],
  ['CAP_SYS_PTRACE', ['kcmp', 'pidfd_getfd', 'process_madvise', 'process_vm_readv', 'process_vm_writev', 'ptrace']],
  ['CAP_SYS_RAWIO', ['iopl', 'ioperm']],
  ['CAP_SYS_TIME', ['settimeofday', 'stime', 'clock_settime', 'clock_settime64']],
  ['CAP_SYS_TTY_CONFIG', ['vhangup']],
  ['CAP_SYS_NICE', ['get_mempolicy', 'mbind', 'set_mempolicy', 'set_mempolicy_home_node']],
  ['CAP_SYSLOG', ['syslog']],
  ['CAP_BPF', ['bpf']],
  ['CAP_PERFMON', ['perf_event_open']],
];

/** Before 4.8 a seccomp-filtered ptrace could rewrite syscalls and escape the filter. */
const PTRACE_FAMILY = ['kcmp', 'pidfd_getfd', 'process_madvise', 'process_vm_readv', 'process_vm_writev', 'ptrace'];

// clone() flags that create namespaces; without CAP_SYS_ADMIN clone must not carry any of them.
const CLONE_NAMESPACE_FLAGS = 0x7e020000; // NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET

// personality() values that only change harmless execution domains (PER_LINUX, PER_LINUX32,
// UNAME26 variants, and the query value 0xffffffff).
const SAFE_PERSONALITIES = [0x0, 0x8, 0x20000, 0x20008, 0xffffffff];

export interface DefaultSeccompOptions {
  /** The capabilities the container's process holds (CAP_ names). */
  capabilities: readonly string[];
  /** Node's process.arch of the host. */
  arch: string;
  /** The host's kernel release (uname -r); unknown is treated as old. */
  kernelRelease?: string;
}

export function defaultSeccompProfile(opts: DefaultSeccompOptions): LinuxSeccomp {
  const arch = ARCHES[opts.arch] ?? { architectures: [], syscalls: [] };
  const caps = new Set(opts.capabilities);
  const allowed = new Set([...ALWAYS, ...arch.syscalls]);
  for (const [cap, names] of BY_CAPABILITY) if (caps.has(cap)) names.forEach((n) => allowed.add(n));
  if (opts.kernelRelease && versionAtLeast(opts.kernelRelease, '4.8')) PTRACE_FAMILY.forEach((n) => allowed.add(n));

  const syscalls: LinuxSyscall[] = [{ names: [...allowed].sort(), action: 'SCMP_ACT_ALLOW' }];
  // One rule per value: seccomp ORs rules and ANDs the argument checks within one rule.
  for (const value of SAFE_PERSONALITIES) {
    syscalls.push({ names: ['personality'], action: 'SCMP_ACT_ALLOW', args: [{ index: 0, value, op: 'SCMP_CMP_EQ' }] });
  }
  if (!caps.has('CAP_SYS_ADMIN')) {
    syscalls.push({
      names: ['clone'],
      action: 'SCMP_ACT_ALLOW',
      args: [{ index: 0, value: CLONE_NAMESPACE_FLAGS, valueTwo: 0, op: 'SCMP_CMP_MASKED_EQ' }],
    });
    // clone3 passes its flags in memory seccomp cannot inspect; ENOSYS makes libc fall back to clone.
    syscalls.push({ names: ['clone3'], action: 'SCMP_ACT_ERRNO', errnoRet: ENOSYS });
  }
  return {
    defaultAction: 'SCMP_ACT_ERRNO',
    defaultErrnoRet: EPERM,
    architectures: [...arch.architectures],
    syscalls,
  };
}
