// What the container and pause builders derive the same way from a CRI security context.
import path from 'node:path';
import type { PodSandboxConfig__Output } from '../../../gen/runtime/v1/PodSandboxConfig.js';
import type { SecurityProfile__Output } from '../../../gen/runtime/v1/SecurityProfile.js';
import { InvalidArgument } from '../../../core/errors.js';
import type { HostFacts } from './host.js';
import type { NamespaceModes } from './namespaces.js';
import type { ImageConfig } from './process.js';
import { int64 } from './resources.js';
import { apparmorProfileName, chooseProfile, seccompProfileFor } from './security.js';
import type { LinuxSeccomp } from './types.js';
import { resolveUser, type ResolvedUser } from './user.js';

export interface ImageInfo {
  /** The image reference kubelet asked for (annotated for tools). */
  name: string;
  config: ImageConfig;
}

/** The fields LinuxContainerSecurityContext and LinuxSandboxSecurityContext share (or nearly). */
export interface SecurityContextFields {
  privileged: boolean;
  run_as_user: { value: string } | null;
  run_as_group: { value: string } | null;
  run_as_username?: string;
  supplemental_groups: string[];
  supplemental_groups_policy: string;
  seccomp: SecurityProfile__Output | null;
  seccomp_profile_path: string;
  apparmor: SecurityProfile__Output | null;
  apparmor_profile?: string;
}

export const DEFAULT_NAMESPACE_MODES: NamespaceModes = { network: 'POD', pid: 'POD', ipc: 'POD' };

/** Pod-level namespace modes from the sandbox config. */
export function podNamespaceModes(config: PodSandboxConfig__Output): NamespaceModes {
  const ns = config.linux?.security_context?.namespace_options;
  return ns ? { network: ns.network, pid: ns.pid, ipc: ns.ipc } : DEFAULT_NAMESPACE_MODES;
}

export function requireId(what: string, id: string): void {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(id)) {
    throw new InvalidArgument(`${what} "${id}" is not a valid id: use letters, digits, "_", "." and "-"`);
  }
}

const optionalInt64 = (field: string, v: { value: string } | null): number | undefined => (v ? int64(field, v.value) : undefined);

/** The process identity a security context asks for, resolved against the image's files. */
export function userFor(sc: SecurityContextFields | null, image: ImageConfig, host: HostFacts): ResolvedUser {
  return resolveUser(
    {
      runAsUser: optionalInt64('run_as_user', sc?.run_as_user ?? null),
      runAsUsername: sc?.run_as_username || undefined,
      runAsGroup: optionalInt64('run_as_group', sc?.run_as_group ?? null),
      imageUser: image.User,
      supplementalGroups: (sc?.supplemental_groups ?? []).map((g) => int64('supplemental_groups', g)),
      strictSupplementalGroups: sc?.supplemental_groups_policy === 'Strict',
    },
    host.passwd,
    host.group,
  );
}

/**
 * The Localhost seccomp profile a security context asks for, by the new field or the legacy
 * `seccomp_profile_path` (`localhost/<path>`): the file the edge must read into `host.seccompProfiles`, keyed
 * by this ref. Undefined when none is needed (no Localhost profile, or privileged). Both forms name an
 * absolute path on the node, as kubelet sends them.
 */
export function localhostSeccompRef(sc: SecurityContextFields | null): string | undefined {
  if (!sc || sc.privileged) return undefined;
  const choice = chooseProfile('seccomp', sc.seccomp ?? null, sc.seccomp_profile_path ?? '');
  if (choice.kind !== 'localhost') return undefined;
  if (!path.posix.isAbsolute(choice.ref)) {
    throw new InvalidArgument(`seccomp profile "${choice.ref}" is not an absolute path: give the profile's full path on the node`);
  }
  return choice.ref;
}

/**
 * Seccomp filter and AppArmor profile. Privileged processes get no seccomp and no default AppArmor
 * profile, but an AppArmor profile they name explicitly (containerd's rule).
 */
export function confinementFor(
  sc: SecurityContextFields | null,
  caps: readonly string[],
  host: HostFacts,
): { seccomp?: LinuxSeccomp; apparmor?: string } {
  const privileged = sc?.privileged ?? false;
  const apparmor = apparmorProfileName(
    chooseProfile('apparmor', sc?.apparmor ?? null, sc?.apparmor_profile ?? ''),
    privileged,
    host.apparmor,
  );
  if (privileged) return { apparmor };
  const seccomp = seccompProfileFor(chooseProfile('seccomp', sc?.seccomp ?? null, sc?.seccomp_profile_path ?? ''), caps, {
    arch: host.arch ?? process.arch,
    kernelRelease: host.kernelRelease,
    seccompProfiles: host.seccompProfiles,
  });
  return { seccomp, apparmor };
}
