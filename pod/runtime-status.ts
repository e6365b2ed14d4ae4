// Status and UpdateRuntimeConfig: whether the runtime and the pod network are ready, as kubelet's
// node-ready check reads it; the work still pending; the pod CIDR kubelet hands us.
import { isIP } from 'node:net';
import { InvalidArgument } from '../core/errors.js';
import { isExecutableFile, resolveExecutable } from '../core/executables.js';
import type { HandlerFeatures } from '../oci/runtime/features.js';
import type { PodContext } from './context.js';

export interface Condition { type: string; status: boolean; reason: string; message: string }

/** RuntimeReady and NetworkReady. */
export async function runtimeConditions(ctx: PodContext, binaries: { runtime: string; conmon: string }): Promise<Condition[]> {
  const needed = [
    { what: `OCI runtime "${binaries.runtime}"`, path: binaries.runtime },
    { what: `conmon "${binaries.conmon}"`, path: binaries.conmon },
  ];
  const missing = needed.filter((b) => !isPresent(b.path)).map((b) => b.what);
  const network = await ctx.network.status();
  const runtime = missing.length === 0
    ? { type: 'RuntimeReady', status: true, reason: '', message: '' }
    : {
      type: 'RuntimeReady', status: false, reason: 'RuntimeBinaryMissing',
      message: `not executable: ${missing.join(', ')}; install it or fix the path in the config`,
    };
  return [
    runtime,
    {
      type: 'NetworkReady', status: network.ready,
      reason: network.ready ? '' : network.reason, message: network.ready ? '' : network.message,
    },
  ];
}

/**
 * Whether `command` names an executable. Status asks on every call and only needs to know that one is there:
 * the file found last time, while it stays executable, answers with one stat instead of a PATH search.
 */
function isPresent(command: string): boolean {
  const last = found.get(command);
  if (last !== undefined && isExecutableFile(last)) return true;
  const now = resolveExecutable(command);
  if (now === undefined) found.delete(command);
  else found.set(command, now);
  return now !== undefined;
}
const found = new Map<string, string>();

/** Teardowns and removals that failed and are retried in the background. */
export function pendingWork(ctx: PodContext) {
  const { sandboxes, containers, containerCleanups } = ctx.tables;
  const removing = [...sandboxes.list(), ...containers.list(), ...containerCleanups.list()].filter((r) => r.removing);
  return {
    teardowns: ctx.tables.teardowns.list().map((t) => ({ sandboxId: t.id, attempts: t.attempts, lastError: t.lastError })),
    removals: removing.map((r) => ({ id: r.id, ...r.removing })),
  };
}

/** kubelet sends one CIDR, or an IPv4 and an IPv6 one joined by a comma. */
export function parsePodCidrs(value: string): string[] {
  const cidrs = value.split(',').map((s) => s.trim()).filter(Boolean);
  for (const cidr of cidrs) {
    const [address, bits, extra] = cidr.split('/');
    const family = isIP(address ?? '');
    const prefix = Number(bits);
    if (extra !== undefined || family === 0 || !/^\d+$/.test(bits ?? '') || prefix > (family === 4 ? 32 : 128)) {
      throw new InvalidArgument(`pod CIDR "${cidr}" is not a valid CIDR (expected e.g. 10.244.1.0/24)`);
    }
  }
  return cidrs;
}

/** Where the pod CIDR is kept across restarts. */
export interface PodCidrStore { getMeta(key: string): string | undefined; setMeta(key: string, value: string): void }

const POD_CIDR_KEY = 'pod_cidr';

export function podCidr(store: PodCidrStore): string | undefined {
  return store.getMeta(POD_CIDR_KEY);
}

/** Takes the pod CIDR kubelet gives; an empty one is kubelet saying it has none yet, so what we had stays. */
export function setPodCidr(ctx: PodContext, store: PodCidrStore, value: string): void {
  if (!value) return;
  const joined = parsePodCidrs(value).join(',');
  store.setMeta(POD_CIDR_KEY, joined);
  ctx.network.setPodCidr(joined);
  ctx.log.info({ podCidr: joined }, 'pod CIDR updated');
}

export interface RuntimeHandlerView { name: string; recursiveReadOnly: boolean; userNamespaces: boolean; missing: string[] }

/**
 * The handlers Status lists: the default one under the empty name (as kubelet looks it up for pods
 * without a RuntimeClass) and again under its own, then every other configured one. Pure.
 */
export function runtimeHandlers(
  defaultHandler: string,
  configured: readonly string[],
  features: ReadonlyMap<string, HandlerFeatures>,
): RuntimeHandlerView[] {
  const view = (name: string, handler: string): RuntimeHandlerView => {
    const f = features.get(handler);
    return {
      name,
      recursiveReadOnly: f?.recursiveReadOnly ?? false,
      userNamespaces: f?.userNamespaces ?? false,
      missing: f?.missing ?? ['not probed'],
    };
  };
  const others = configured.filter((h) => h !== defaultHandler).sort();
  return [view('', defaultHandler), view(defaultHandler, defaultHandler), ...others.map((h) => view(h, h))];
}
