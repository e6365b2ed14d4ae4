// Namespaces. The pause container owns the pod's IPC, UTS and PID namespaces and joins the
// pod's network namespace; app containers join the pause's. An absent entry means "the host's".
import type { NamespaceMode__Output } from '../../../gen/runtime/v1/NamespaceMode.js';
import { InvalidArgument } from '../../../core/errors.js';
import type { SpecOpt } from './opts.js';
import { linuxOf } from './opts.js';
import type { LinuxNamespace } from './types.js';

export interface NamespaceModes {
  network: NamespaceMode__Output;
  pid: NamespaceMode__Output;
  ipc: NamespaceMode__Output;
}

export const nsPath = (pid: number, ns: 'net' | 'ipc' | 'uts' | 'pid' | 'user'): string => `/proc/${pid}/ns/${ns}`;

function checkPid(what: string, pid: number | undefined): number {
  if (pid === undefined || !Number.isInteger(pid) || pid <= 0) {
    throw new InvalidArgument(`${what} pid ${String(pid)} is not a running process id`);
  }
  return pid;
}

/**
 * The pause container: new mount, IPC, UTS and PID namespaces unless the pod uses the host's;
 * the network namespace is the one prepared at `netnsPath`, or with `newNetns` (a pod in its own user
 * namespace) a new one runc makes, which the edge pins once the pause runs. Host network also keeps
 * the host's UTS namespace, so the pod sees the node's hostname.
 */
export function pauseNamespaces(modes: NamespaceModes, netnsPath: string | undefined, opts: { newNetns?: boolean } = {}): LinuxNamespace[] {
  const ns: LinuxNamespace[] = [{ type: 'mount' }];
  if (modes.network !== 'NODE') {
    if (opts.newNetns) ns.push({ type: 'network' }, { type: 'uts' });
    else if (!netnsPath) throw new InvalidArgument('the pod does not use host networking but no network namespace path was given');
    else ns.push({ type: 'network', path: netnsPath }, { type: 'uts' });
  }
  if (modes.ipc !== 'NODE') ns.push({ type: 'ipc' });
  if (modes.pid !== 'NODE') ns.push({ type: 'pid' });
  return ns;
}

export interface ContainerNamespaceContext {
  pausePid: number;
  netnsPath?: string;
  /** For PID mode TARGET: the target container's init pid. */
  targetPid?: number;
}

/**
 * An app container: its own mount namespace; network, IPC and UTS of the pause; PID per mode:
 * POD → the pause's, CONTAINER → a new one, NODE → the host's, TARGET → the target container's.
 */
export function containerNamespaces(modes: NamespaceModes, ctx: ContainerNamespaceContext): LinuxNamespace[] {
  const pause = (): number => checkPid('pause container', ctx.pausePid);
  const ns: LinuxNamespace[] = [{ type: 'mount' }];
  if (modes.network !== 'NODE') {
    ns.push({ type: 'network', path: ctx.netnsPath || nsPath(pause(), 'net') }, { type: 'uts', path: nsPath(pause(), 'uts') });
  }
  if (modes.ipc !== 'NODE') ns.push({ type: 'ipc', path: nsPath(pause(), 'ipc') });
  switch (modes.pid) {
    case 'POD': ns.push({ type: 'pid', path: nsPath(pause(), 'pid') }); break;
    case 'CONTAINER': ns.push({ type: 'pid' }); break;
    case 'TARGET': ns.push({ type: 'pid', path: nsPath(checkPid('target container', ctx.targetPid), 'pid') }); break;
    case 'NODE': break;
  }
  return ns;
}

export function withNamespaces(namespaces: readonly LinuxNamespace[]): SpecOpt {
  return (spec) => { linuxOf(spec).namespaces = namespaces.map((n) => ({ ...n })); };
}
