// Capability sets: containerd's default set, CRI add/drop (with "ALL"), privileged = everything.
import { InvalidArgument } from '../../../core/errors.js';
import type { SpecOpt } from './opts.js';
import { processOf } from './opts.js';

/** The capabilities a non-privileged container gets when the CRI config asks for nothing else. */
export const DEFAULT_CAPABILITIES: readonly string[] = [
  'CAP_CHOWN',
  'CAP_DAC_OVERRIDE',
  'CAP_FSETID',
  'CAP_FOWNER',
  'CAP_MKNOD',
  'CAP_NET_RAW',
  'CAP_SETGID',
  'CAP_SETUID',
  'CAP_SETFCAP',
  'CAP_SETPCAP',
  'CAP_NET_BIND_SERVICE',
  'CAP_SYS_CHROOT',
  'CAP_KILL',
  'CAP_AUDIT_WRITE',
];

/** Every capability name Linux defines (up to 6.x), to reject typos before runc does. */
export const KNOWN_CAPABILITIES: ReadonlySet<string> = new Set([
  'CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_DAC_READ_SEARCH', 'CAP_FOWNER', 'CAP_FSETID', 'CAP_KILL',
  'CAP_SETGID', 'CAP_SETUID', 'CAP_SETPCAP', 'CAP_LINUX_IMMUTABLE', 'CAP_NET_BIND_SERVICE',
  'CAP_NET_BROADCAST', 'CAP_NET_ADMIN', 'CAP_NET_RAW', 'CAP_IPC_LOCK', 'CAP_IPC_OWNER',
  'CAP_SYS_MODULE', 'CAP_SYS_RAWIO', 'CAP_SYS_CHROOT', 'CAP_SYS_PTRACE', 'CAP_SYS_PACCT',
  'CAP_SYS_ADMIN', 'CAP_SYS_BOOT', 'CAP_SYS_NICE', 'CAP_SYS_RESOURCE', 'CAP_SYS_TIME',
  'CAP_SYS_TTY_CONFIG', 'CAP_MKNOD', 'CAP_LEASE', 'CAP_AUDIT_WRITE', 'CAP_AUDIT_CONTROL',
  'CAP_SETFCAP', 'CAP_MAC_OVERRIDE', 'CAP_MAC_ADMIN', 'CAP_SYSLOG', 'CAP_WAKE_ALARM',
  'CAP_BLOCK_SUSPEND', 'CAP_AUDIT_READ', 'CAP_PERFMON', 'CAP_BPF', 'CAP_CHECKPOINT_RESTORE',
]);

/** CRI names come without the CAP_ prefix and in any case; OCI wants CAP_UPPER. */
export function normalizeCapability(name: string): string {
  const full = capName(name);
  if (!KNOWN_CAPABILITIES.has(full)) {
    throw new InvalidArgument(`unknown capability "${name}": use a Linux capability name such as NET_ADMIN`);
  }
  return full;
}

function capName(name: string): string {
  const upper = name.trim().toUpperCase();
  return upper.startsWith('CAP_') ? upper : `CAP_${upper}`;
}

const isAll = (c: string): boolean => c.trim().toUpperCase() === 'ALL';

/**
 * The effective capability list after CRI add/drop, in containerd's order: add ALL → every
 * capability of the bounding set, drop ALL → none, then the named adds, then the named drops.
 * So add [ALL] + drop [CHOWN] is everything but CHOWN, and drop [ALL] + add [X] is just X.
 */
export function resolveCapabilities(
  base: readonly string[],
  add: readonly string[],
  drop: readonly string[],
  allCaps: readonly string[],
): string[] {
  let caps = [...base];
  if (add.some(isAll)) caps = allCaps.map(capName); // the host's own set, trusted as is
  if (drop.some(isAll)) caps = [];
  for (const c of add.filter((c) => !isAll(c)).map(normalizeCapability)) {
    if (!caps.includes(c)) caps.push(c);
  }
  const dropped = new Set(drop.filter((c) => !isAll(c)).map(normalizeCapability));
  return caps.filter((c) => !dropped.has(c));
}

/**
 * Sets bounding, effective and permitted to `caps`. Inheritable and ambient stay empty so an
 * exec'd non-root binary cannot pick capabilities up through file caps (CVE-2022-24769).
 */
export function withCapabilities(caps: readonly string[]): SpecOpt {
  return (spec) => {
    processOf(spec).capabilities = {
      bounding: [...caps],
      effective: [...caps],
      permitted: [...caps],
      inheritable: [],
      ambient: [],
    };
  };
}
