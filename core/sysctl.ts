// Pod sysctls: the one place their names are normalised and their namespace is told. Validation,
// the pause spec (IPC sysctls) and the network namespace (net.* sysctls) all read them through here.
import { InvalidArgument } from './errors.js';

/** Sysctls scoped to an IPC namespace: the SysV limits Kubernetes exposes and the POSIX queue limits. */
const IPC_SYSCTLS = new Set([
  'kernel.sem', 'kernel.shmall', 'kernel.shmmax', 'kernel.shmmni', 'kernel.shm_rmid_forced',
  'kernel.msgmax', 'kernel.msgmnb', 'kernel.msgmni',
]);

/** Dotted components; a component may hold '/', which stands for a '.' in the kernel's name (eth0.100). */
const NAME = /^[a-z0-9_]+(\.[a-z0-9_-]+(\/[a-z0-9_-]+)*)+$/i;

/**
 * kubelet accepts `net/ipv4/ip_forward` as well as `net.ipv4.ip_forward`. A name whose first separator is
 * '/' is written with the two separators swapped, so `net/ipv4/conf/eth0.100/rp_filter` becomes
 * `net.ipv4.conf.eth0/100.rp_filter`: the dotted form `sysctl` and the kernel take.
 */
export function normalizeSysctlName(name: string): string {
  const first = name.search(/[./]/);
  if (first === -1 || name[first] === '.') return name;
  return name.replace(/[./]/g, (c) => (c === '.' ? '/' : '.'));
}

/** The namespace a (normalised) sysctl belongs to, or undefined when it is node-wide. */
export function sysctlNamespace(name: string): 'ipc' | 'net' | undefined {
  if (IPC_SYSCTLS.has(name) || name.startsWith('fs.mqueue.')) return 'ipc';
  if (name.startsWith('net.')) return 'net';
  return undefined;
}

/**
 * Normalises every name and checks names and values; a sysctl that is not namespaced per pod (and so
 * would change the node) is refused. Returns the normalised map.
 */
export function normalizeSysctls(sysctls: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [raw, value] of Object.entries(sysctls)) {
    const name = normalizeSysctlName(raw);
    if (!NAME.test(name)) throw new InvalidArgument(`sysctl "${raw}" is not a valid sysctl name`);
    if (!sysctlNamespace(name)) {
      throw new InvalidArgument(
        `sysctl "${raw}" is not namespaced per pod and cannot be set: ` +
          'only IPC (kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*) and net.* sysctls can',
      );
    }
    if (/[\n\0=]/.test(value)) {
      throw new InvalidArgument(`sysctl "${raw}" has an invalid value ${JSON.stringify(value)}: no newline, NUL or '=' allowed`);
    }
    out[name] = value;
  }
  return out;
}
