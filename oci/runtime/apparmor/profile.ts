// minicri's own default AppArmor profile for containers: what RuntimeDefault (and a request that names
// no profile) means on a node with AppArmor. The text is the policy source apparmor_parser compiles.

/** The profile's name, as containers show it in /proc/<pid>/attr/current. */
export const MINICRI_PROFILE = 'minicri-default';

/**
 * Bumped with every change of the text below. The loader compares the whole text with what it loaded this
 * boot, so the number is for people: it says which version a node runs.
 */
export const MINICRI_PROFILE_VERSION = 3;

/**
 * The profile source. ABI 3.0 is pinned so the policy compiles (and behaves) the same whatever the kernel
 * and parser know: under a newer ABI, `network,` stops covering unix sockets.
 */
export function minicriProfileText(): string {
  const self = MINICRI_PROFILE;
  return `# ${self} version ${MINICRI_PROFILE_VERSION}: minicri's default AppArmor profile for containers.
# minicri writes this file and loads it with apparmor_parser -r at start; edits here are overwritten.
abi <abi/3.0>,
include <tunables/global>

profile ${self} flags=(attach_disconnected,mediate_deleted) {
  # A container is a whole system of its own: its files, its sockets and the capabilities runc left it
  # are its business. What follows takes away what reaches the host through them.
  network,
  capability,
  file,

  # Containers under this profile signal one another; host tools signal them (the daemon and runc run
  # unconfined on Debian; Ubuntu labels runc and crun with profiles of their own names).
  signal (send, receive) peer=${self},
  signal (receive) peer=unconfined,
  signal (receive) peer=runc,
  signal (receive) peer=crun,

  # Tracing and /proc/<pid> inspection (ps, top) only among processes of this profile.
  ptrace (trace, read, tracedby, readby) peer=${self},

  # No new mounts, even with CAP_SYS_ADMIN: a mount can cover the masks on /proc and /sys or bring a host
  # filesystem in. No unmounts under /proc and /sys either: that would take runc's masks and read-only
  # binds away. Both logged, so a refusal can be traced. Unmounts elsewhere stay allowed on purpose: a
  # profile with only deny rules for mounts compiles to one that does not mediate mounts at all (seen on
  # Debian 12's kernel 6.1: the mount went through), so the allow rule keeps the class in the policy.
  umount,
  audit deny mount,
  audit deny umount /proc{,/**},
  audit deny umount /sys{,/**},

  # /proc: a process may write its own entries (/proc/<pid>/..., which /proc/self leads to) and nothing
  # else: not the files directly in /proc, not /proc/sys (kernel settings for the whole node), not the
  # other directories (bus, fs, irq, sysvipc, ...).
  deny @{PROC}/* w,
  deny @{PROC}/[^1-9/]*/** w,
  deny @{PROC}/sysrq-trigger rwklx,
  deny @{PROC}/kcore rwklx,

  # /sys: read-only, except the cgroup tree a container may be delegated; firmware tables, the power
  # meters (a side channel) and the security modules' own interface not even readable.
  deny /sys/{[^f]*,f[^s]*,fs/[^c]*,fs/c[^g]*,fs/cg[^r]*}/** wklx,
  deny /sys/firmware/** rwklx,
  deny /sys/devices/virtual/powercap/** rwklx,
  deny /sys/kernel/security/** rwklx,
}
`;
}
