// Pod-wide kernel settings: hostname and namespaced sysctls.
import { InvalidArgument } from '../../../core/errors.js';
import { normalizeSysctls, sysctlNamespace } from '../../../core/sysctl.js';
import type { SpecOpt } from './opts.js';
import { linuxOf } from './opts.js';

/** An RFC 1123 hostname as the kernel accepts it (at most 64 bytes). */
export function validateHostname(name: string): string {
  if (name.length > 64 || !/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/i.test(name)) {
    throw new InvalidArgument(`hostname "${name}" is not a valid RFC 1123 hostname of at most 64 characters`);
  }
  return name;
}

export function withHostname(name: string | undefined): SpecOpt {
  return (spec) => {
    if (name) spec.hostname = validateHostname(name);
    else delete spec.hostname;
  };
}

export interface PodSysctls {
  /** IPC-namespace sysctls: set on the pause spec. */
  ipc: Record<string, string>;
  /** Network-namespace sysctls: applied where the network namespace is set up. */
  net: Record<string, string>;
}

/**
 * Validates and splits the pod's sysctls. Names may use "/" separators (kubelet accepts both);
 * they are normalised to dots. A sysctl that is not namespaced, or whose namespace the pod shares
 * with the host, would change the whole node and is refused.
 */
export function splitSysctls(sysctls: Readonly<Record<string, string>>, hostIpc: boolean, hostNetwork: boolean): PodSysctls {
  const out: PodSysctls = { ipc: {}, net: {} };
  for (const [name, value] of Object.entries(normalizeSysctls(sysctls))) {
    if (sysctlNamespace(name) === 'ipc') {
      if (hostIpc) throw new InvalidArgument(`sysctl "${name}" is not allowed with the host IPC namespace: it would change the node`);
      out.ipc[name] = value;
    } else {
      if (hostNetwork) throw new InvalidArgument(`sysctl "${name}" is not allowed with host networking: it would change the node`);
      out.net[name] = value;
    }
  }
  return out;
}

export function withSysctls(sysctls: Readonly<Record<string, string>>): SpecOpt {
  return (spec) => {
    if (Object.keys(sysctls).length > 0) linuxOf(spec).sysctl = { ...sysctls };
    else delete linuxOf(spec).sysctl;
  };
}
