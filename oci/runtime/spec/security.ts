// Security settings: masked/read-only /proc and /sys paths, seccomp and AppArmor profile
// selection, devices, and what "privileged" lifts.
import path from 'node:path';
import { FailedPrecondition, InvalidArgument } from '../../../core/errors.js';
import type { SecurityProfile__Output } from '../../../gen/runtime/v1/SecurityProfile.js';
import type { SELinuxOption__Output } from '../../../gen/runtime/v1/SELinuxOption.js';
import type { SpecOpt } from './opts.js';
import { linuxOf, processOf, resourcesOf } from './opts.js';
import { cleanPath } from './mounts.js';
import { defaultSeccompProfile } from './seccomp-default.js';
import type { LinuxDevice, LinuxSeccomp, LinuxSeccompArg, LinuxSyscall } from './types.js';

/** Paths under /proc and /sys that leak host information or kernel internals. */
export const DEFAULT_MASKED_PATHS: readonly string[] = [
  '/proc/acpi',
  '/proc/asound',
  '/proc/kcore',
  '/proc/keys',
  '/proc/latency_stats',
  '/proc/timer_list',
  '/proc/timer_stats',
  '/proc/sched_debug',
  '/proc/scsi',
  '/sys/firmware',
  '/sys/devices/virtual/powercap',
];

/** Paths under /proc that are readable but must not be written from a container. */
export const DEFAULT_READONLY_PATHS: readonly string[] = [
  '/proc/bus',
  '/proc/fs',
  '/proc/irq',
  '/proc/sys',
  '/proc/sysrq-trigger',
];

/**
 * Exactly the lists given; privileged clears both later. kubelet always sends its default lists and sends
 * them empty for procMount Unmasked; on the wire empty cannot be told from unset, so empty means no masks,
 * as in containerd and CRI-O: a CRI client that leaves them out gets an unmasked /proc.
 */
export function withMaskedPaths(masked: readonly string[], readonly: readonly string[]): SpecOpt {
  return (spec) => {
    const linux = linuxOf(spec);
    linux.maskedPaths = [...masked];
    linux.readonlyPaths = [...readonly];
  };
}

/** Privileged pods see /proc and /sys unfiltered. */
export function withoutMaskedPaths(): SpecOpt {
  return (spec) => {
    const linux = linuxOf(spec);
    linux.maskedPaths = [];
    linux.readonlyPaths = [];
  };
}

export function withNoNewPrivileges(on: boolean): SpecOpt {
  return (spec) => { processOf(spec).noNewPrivileges = on; };
}

/** A host device node, as the edge found it under /dev. */
export interface HostDevice {
  path: string;
  type: 'c' | 'b' | 'u' | 'p';
  major: number;
  minor: number;
  /** The node's permission bits (st_mode & 0o7777). */
  fileMode: number;
  uid: number;
  gid: number;
}

/** The CRI Device fields we read. */
export interface CriDevice {
  container_path: string;
  host_path: string;
  permissions: string;
}

/**
 * Exposes CRI devices: the node is created in the container and the device cgroup allows the
 * requested access. A host directory maps every device below it to the same relative place.
 */
export function withDevices(devices: readonly CriDevice[], host: readonly HostDevice[]): SpecOpt {
  return (spec) => {
    const linux = linuxOf(spec);
    const resources = resourcesOf(spec);
    linux.devices ??= [];
    resources.devices ??= [];
    for (const d of devices) {
      const access = d.permissions === '' ? 'rwm' : d.permissions;
      if (!/^[rwm]{1,3}$/.test(access) || new Set(access).size !== access.length) {
        throw new InvalidArgument(`device "${d.host_path}" has permissions "${d.permissions}": use a combination of r, w and m`);
      }
      const hostPath = cleanPath(d.host_path);
      const containerPath = cleanPath(d.container_path || d.host_path);
      if (!path.posix.isAbsolute(hostPath) || !path.posix.isAbsolute(containerPath)) {
        throw new InvalidArgument(`device "${d.host_path}" → "${d.container_path}": both paths must be absolute`);
      }
      const exact = host.find((h) => h.path === hostPath);
      const matched: Array<[HostDevice, string]> = exact
        ? [[exact, containerPath]]
        : host
            .filter((h) => h.path.startsWith(`${hostPath}/`))
            .map((h) => [h, path.posix.join(containerPath, h.path.slice(hostPath.length))]);
      if (matched.length === 0) {
        throw new InvalidArgument(`device "${d.host_path}" does not exist on this node: check the host path`);
      }
      for (const [h, target] of matched) {
        linux.devices.push(toLinuxDevice(h, target));
        resources.devices.push({ allow: true, type: h.type, major: h.major, minor: h.minor, access });
      }
    }
  };
}

function toLinuxDevice(h: HostDevice, target: string): LinuxDevice {
  return { path: target, type: h.type, major: h.major, minor: h.minor, fileMode: h.fileMode, uid: h.uid, gid: h.gid };
}

/**
 * Privileged: every host device, all device access, no masked or read-only paths. Capabilities,
 * writable sysfs and dropping seccomp/AppArmor are separate opts the builders apply alongside.
 */
export function withPrivileged(hostDevices: readonly HostDevice[]): SpecOpt {
  return (spec) => {
    const linux = linuxOf(spec);
    linux.devices = hostDevices.map((h) => toLinuxDevice(h, h.path));
    resourcesOf(spec).devices = [{ allow: true, access: 'rwm' }];
    withoutMaskedPaths()(spec);
  };
}

/** AppArmor on a node that enforces it, as the edge found it (see HostFacts.apparmor). */
export interface ApparmorFacts {
  /** The profile RuntimeDefault (and a request naming none) maps to: config key apparmor_profile. */
  defaultProfile: string;
  /** What a pod needing the default profile is told when the kernel does not list it: why, and what to do. */
  defaultMissing: string;
  /** The profiles the kernel holds now (/sys/kernel/security/apparmor/profiles), in any mode. */
  loaded: ReadonlySet<string>;
}

export type ProfileChoice =
  | { kind: 'unconfined' }
  | { kind: 'runtime-default' }
  | { kind: 'localhost'; ref: string };

const LOCALHOST_PREFIX = 'localhost/';

/**
 * Which profile the CRI asks for: the structured field wins; else the legacy path string
 * (runtime/default, docker/default, unconfined, localhost/<ref>). Nothing at all means
 * unconfined for seccomp (kubelet asks for RuntimeDefault explicitly) but the runtime's default
 * for AppArmor, as kubelet expects from containerd and CRI-O.
 */
export function chooseProfile(what: 'seccomp' | 'apparmor', profile: SecurityProfile__Output | null, legacy: string): ProfileChoice {
  if (profile) {
    if (profile.profile_type !== 'Localhost' && profile.localhost_ref !== '') {
      throw new InvalidArgument(
        `${what} profile sets localhost_ref "${profile.localhost_ref}" with type ${profile.profile_type}: ` +
          'localhost_ref is only for Localhost',
      );
    }
    switch (profile.profile_type) {
      case 'Unconfined': return { kind: 'unconfined' };
      case 'RuntimeDefault': return { kind: 'runtime-default' };
      case 'Localhost':
        if (profile.localhost_ref === '') throw new InvalidArgument(`${what} profile type Localhost needs a localhost_ref`);
        return { kind: 'localhost', ref: profile.localhost_ref };
    }
  }
  switch (legacy) {
    case '': return what === 'apparmor' ? { kind: 'runtime-default' } : { kind: 'unconfined' };
    case 'unconfined': return { kind: 'unconfined' };
    case 'runtime/default': case 'docker/default': return { kind: 'runtime-default' };
  }
  if (legacy.startsWith(LOCALHOST_PREFIX) && legacy.length > LOCALHOST_PREFIX.length) {
    return { kind: 'localhost', ref: legacy.slice(LOCALHOST_PREFIX.length) };
  }
  throw new InvalidArgument(`${what} profile "${legacy}" is not understood: use runtime/default, unconfined or localhost/<profile>`);
}

const SECCOMP_ACTIONS = new Set([
  'SCMP_ACT_KILL', 'SCMP_ACT_KILL_PROCESS', 'SCMP_ACT_KILL_THREAD', 'SCMP_ACT_TRAP', 'SCMP_ACT_ERRNO',
  'SCMP_ACT_TRACE', 'SCMP_ACT_ALLOW', 'SCMP_ACT_LOG', 'SCMP_ACT_NOTIFY',
]);

/**
 * Reads a Localhost seccomp profile (OCI LinuxSeccomp JSON; Docker's archMap form is accepted
 * too). Only the fields the OCI spec knows are kept, so runc sees nothing it would reject.
 */
export function parseSeccompProfile(ref: string, text: string): LinuxSeccomp {
  const bad = (why: string): never => {
    throw new InvalidArgument(`seccomp profile "${ref}" is invalid: ${why}`);
  };
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    return bad(`not JSON (${(err as Error).message})`);
  }
  if (typeof raw !== 'object' || raw === null) return bad('expected a JSON object');
  const p = raw as Record<string, unknown>;
  const action = (v: unknown, where: string): LinuxSyscall['action'] =>
    typeof v === 'string' && SECCOMP_ACTIONS.has(v)
      ? (v as LinuxSyscall['action'])
      : bad(`${where} "${String(v)}" is not a seccomp action`);
  const out: LinuxSeccomp = { defaultAction: action(p.defaultAction, 'defaultAction') };
  if (typeof p.defaultErrnoRet === 'number') out.defaultErrnoRet = p.defaultErrnoRet;
  if (Array.isArray(p.architectures)) {
    out.architectures = p.architectures.map(String);
  } else if (Array.isArray(p.archMap)) {
    out.architectures = (p.archMap as Array<{ architecture?: unknown; subArchitectures?: unknown }>).flatMap((a) => [
      String(a.architecture),
      ...(Array.isArray(a.subArchitectures) ? a.subArchitectures.map(String) : []),
    ]);
  }
  if (Array.isArray(p.flags)) out.flags = p.flags.map(String);
  if (p.syscalls !== undefined) {
    if (!Array.isArray(p.syscalls)) bad('syscalls must be a list');
    out.syscalls = (p.syscalls as Array<Record<string, unknown>>).map((s, i) => {
      const names = Array.isArray(s.names)
        ? s.names.map(String)
        : typeof s.name === 'string' ? [s.name] : bad(`syscalls[${i}] has no names`);
      const rule: LinuxSyscall = { names, action: action(s.action, `syscalls[${i}].action`) };
      if (typeof s.errnoRet === 'number') rule.errnoRet = s.errnoRet;
      if (Array.isArray(s.args) && s.args.length > 0) {
        rule.args = (s.args as Array<Record<string, unknown>>).map((a, j) => {
          if (typeof a.index !== 'number' || typeof a.value !== 'number' || typeof a.op !== 'string' || !a.op.startsWith('SCMP_CMP_')) {
            return bad(`syscalls[${i}].args[${j}] needs a numeric index and value and an SCMP_CMP_ op`);
          }
          const arg: LinuxSeccompArg = { index: a.index, value: a.value, op: a.op as LinuxSeccompArg['op'] };
          if (typeof a.valueTwo === 'number') arg.valueTwo = a.valueTwo;
          return arg;
        });
      }
      return rule;
    });
  }
  return out;
}

export function withSeccomp(profile: LinuxSeccomp | undefined): SpecOpt {
  return (spec) => {
    if (profile) linuxOf(spec).seccomp = profile;
    else delete linuxOf(spec).seccomp;
  };
}

export function withApparmorProfile(name: string | undefined): SpecOpt {
  return (spec) => {
    if (name) processOf(spec).apparmorProfile = name;
    else delete processOf(spec).apparmorProfile;
  };
}

/**
 * The AppArmor profile to apply, or undefined for none. Without AppArmor on the node, RuntimeDefault and
 * Unconfined mean nothing and a named profile cannot be honoured. A privileged process gets no default
 * profile but the one it names (as containerd does). A profile must be loaded in the kernel: runc would
 * otherwise fail the start with a message that names neither the profile nor the remedy.
 */
export function apparmorProfileName(choice: ProfileChoice, privileged: boolean, apparmor: ApparmorFacts | undefined): string | undefined {
  if (choice.kind === 'unconfined') return undefined;
  if (!apparmor) {
    if (choice.kind === 'localhost') {
      throw new InvalidArgument(`AppArmor profile "${choice.ref}" was requested but AppArmor is not enabled on this node`);
    }
    return undefined;
  }
  if (choice.kind === 'localhost') {
    // kubelet sends the bare name; the legacy form's prefix is tolerated here too.
    const name = choice.ref.startsWith(LOCALHOST_PREFIX) ? choice.ref.slice(LOCALHOST_PREFIX.length) : choice.ref;
    if (!apparmor.loaded.has(name)) {
      throw new InvalidArgument(`AppArmor profile "${name}" is not loaded on this node: load it with "apparmor_parser -r <file>" `
        + `(the file that defines profile ${name}; it then shows in /sys/kernel/security/apparmor/profiles), or use RuntimeDefault`);
    }
    return name;
  }
  if (privileged) return undefined;
  if (!apparmor.loaded.has(apparmor.defaultProfile)) {
    throw new FailedPrecondition(
      `AppArmor RuntimeDefault needs the default profile "${apparmor.defaultProfile}", ` +
        `which is not loaded on this node: ${apparmor.defaultMissing}`,
    );
  }
  return apparmor.defaultProfile;
}

/**
 * minicri applies no SELinux labels. Where SELinux is enabled, a request for them is refused rather than
 * run unlabelled; elsewhere they mean nothing and are ignored, as containerd and CRI-O ignore them.
 */
export function refuseSelinuxLabels(
  hostSelinux: boolean,
  options: SELinuxOption__Output | null | undefined,
  mounts: readonly { container_path: string; selinux_relabel: boolean }[] = [],
): void {
  if (!hostSelinux) return;
  const labels = (['user', 'role', 'type', 'level'] as const).flatMap((k) => (options?.[k] ? [`${k} "${options[k]}"`] : []));
  const relabel = mounts.find((m) => m.selinux_relabel);
  let asked: string;
  if (labels.length > 0) asked = `selinux_options (${labels.join(', ')})`;
  else if (relabel) asked = `selinux_relabel on the mount at "${relabel.container_path}"`;
  else return;
  throw new FailedPrecondition(`the request sets ${asked}, but SELinux is enabled on this node and minicri does not apply SELinux labels: `
    + 'run the pod on a node without SELinux enabled');
}

export interface SeccompHost {
  /** Node's process.arch of the host. */
  arch: string;
  /** uname -r, for kernel-dependent rules of the default profile. */
  kernelRelease?: string;
  /** Localhost profiles the edge read, keyed by localhost_ref. */
  seccompProfiles?: Readonly<Record<string, string>>;
}

/** The seccomp filter for a choice; `caps` are the process's capabilities (they widen the default). */
export function seccompProfileFor(choice: ProfileChoice, caps: readonly string[], host: SeccompHost): LinuxSeccomp | undefined {
  switch (choice.kind) {
    case 'unconfined': return undefined;
    case 'runtime-default': return defaultSeccompProfile({ capabilities: caps, arch: host.arch, kernelRelease: host.kernelRelease });
    case 'localhost': {
      const text = host.seccompProfiles?.[choice.ref];
      if (text === undefined) {
        throw new InvalidArgument(`seccomp profile "${choice.ref}" was not found on this node: place it there or use RuntimeDefault`);
      }
      return parseSeccompProfile(choice.ref, text);
    }
  }
}
