// A pod's attachments (one network on one interface each: lo, eth0, then the secondary ones) and the one
// walk over them every pod operation uses: set-up makes them in order, tear-down and GC undo them in
// reverse, check goes through them in order. Where an attachment comes from (the pod's plan, or the
// result cache) is the caller's; the order and what a failure does are decided here. Pure but for the
// walk's actions.
import { Internal } from '../core/errors.js';
import type { TimelineEntry } from '../core/timeline.js';
import { allowedCniArgs, attachmentCapabilityArgs, withArgsCni } from './args.js';
import type { CachedAttachment } from './cache.js';
import { LOOPBACK_NETWORK, type NetworkList } from './config.js';
import { withDeviceId } from './devices.js';
import { LOOPBACK_IFNAME, POD_IFNAME } from './network-selection.js';
import type { PodPlan, SecondaryPlan } from './pod-plan.js';
import type { CniResult } from './result.js';

/** What a plugin-chain run needs besides the network list. */
export interface Invocation {
  containerId: string;
  netns: string;
  ifName: string;
  args: [string, string][];
  caps: Record<string, unknown>;
  /** Where each plugin's ADD time goes. */
  steps?: TimelineEntry[];
}

export interface Attachment {
  list: NetworkList;
  inv: Invocation;
  /** What ADD returned (from the cache, or the set-up being undone): DEL and CHECK replay it. */
  prev?: CniResult;
  /** The namespace ADD ran in, from the cache: GC uses it while it still exists. */
  cachedNetns?: string;
  /** When ADD finished, from the cache: the order tear-down undoes secondary attachments in. */
  attachedAt?: number;
  /** A secondary attachment being set up: its name in the network status and its default route. */
  secondary?: SecondaryPlan;
}

/** What every attachment of a pod gets unless its cache entry or its selection says otherwise. */
export interface PodInvocation {
  containerId: string;
  netns: string;
  args: [string, string][];
  caps: Record<string, unknown>;
  steps?: TimelineEntry[];
}

/**
 * The attachments set-up makes: lo, eth0 on the plan's main network, then each secondary network on its
 * interface, with the device it was given (`deviceIds`, one per secondary) written into its config.
 */
export function plannedAttachments(plan: PodPlan, pod: PodInvocation, deviceIds: (string | undefined)[] = []): Attachment[] {
  const secondaries = plan.secondaries.map((s, i): Attachment => {
    const deviceId = deviceIds[i];
    const list = withArgsCni(deviceId ? withDeviceId(s.list, deviceId) : s.list, allowedCniArgs(s.selection.cniArgs, s.list));
    return { list, inv: secondaryInvocation(pod, s, deviceId), secondary: s };
  });
  return [
    { list: LOOPBACK_NETWORK, inv: { ...pod, ifName: LOOPBACK_IFNAME } },
    { list: plan.main, inv: { ...pod, ifName: POD_IFNAME } },
    ...secondaries,
  ];
}

/**
 * What tear-down DELs through for interfaces the cache has no entry for (the cache was lost, or set-up died
 * midway): the networks the pod asked for, as far as they still resolve. A device-backed attachment is not
 * among them: it cannot be DELeted without its device, which only the cache knows.
 */
export function fallbackAttachments(plan: PodPlan | undefined, defaultNet: NetworkList | undefined, pod: PodInvocation): Attachment[] {
  const out: Attachment[] = [];
  for (const s of plan?.secondaries ?? []) {
    if (s.resourceName || s.dra) continue;
    out.push({ list: s.list, inv: secondaryInvocation(pod, s) });
  }
  const main = plan?.main ?? defaultNet;
  if (main) out.push({ list: main, inv: { ...pod, ifName: POD_IFNAME } });
  out.push({ list: LOOPBACK_NETWORK, inv: { ...pod, ifName: LOOPBACK_IFNAME } });
  return out;
}

/** The cached attachments, then each fallback whose interface none of them has. */
export function withFallbacks(cached: Attachment[], fallbacks: Attachment[]): Attachment[] {
  return [...cached, ...fallbacks.filter((f) => !cached.some((c) => c.inv.ifName === f.inv.ifName))];
}

/** A cache entry as an attachment: the config, args and result its ADD used, in namespace `netns` now. */
export function cachedAttachment(
  entry: CachedAttachment,
  list: NetworkList,
  prev: CniResult | undefined,
  netns: string,
  fallback: Pick<PodInvocation, 'args' | 'caps'>,
): Attachment {
  return {
    list,
    inv: {
      containerId: entry.containerId,
      netns,
      ifName: entry.ifName,
      args: entry.cniArgs ?? fallback.args,
      caps: entry.capabilityArgs ?? fallback.caps,
    },
    ...(prev ? { prev } : {}),
    ...(entry.netns ? { cachedNetns: entry.netns } : {}),
    ...(entry.attachedAt !== undefined ? { attachedAt: entry.attachedAt } : {}),
  };
}

/** A secondary attachment's invocation: CNI_ARGS the pod's then the selection's cni-args (as allowed), its own capabilities. */
function secondaryInvocation(pod: PodInvocation, s: SecondaryPlan, deviceId?: string): Invocation {
  const args: [string, string][] = [...pod.args, ...Object.entries(allowedCniArgs(s.selection.cniArgs, s.list) ?? {})];
  return { ...pod, ifName: s.ifName, args, caps: attachmentCapabilityArgs(pod.caps, s.selection, deviceId) };
}

export function isLoopback(a: Attachment): boolean {
  return a.list.name === LOOPBACK_NETWORK.name && a.inv.ifName === LOOPBACK_IFNAME;
}

export interface Walk {
  /** 'attach': the order set-up makes attachments in; 'detach': the reverse, one at a time. */
  direction: 'attach' | 'detach';
  /** Secondary interfaces in the order the pod asked for them, for attachments the cache has no time of. */
  planned?: string[];
  /** Stop after the first step that failed (set-up, check), or go on and report every failure (tear-down, GC). */
  stopAtFailure: boolean;
}

export interface AttachmentFailure {
  attachment: Attachment;
  error: Error;
}

/**
 * Runs `action` on each attachment in the walk's order and returns the failures, in that order.
 * The attach order is lo and eth0 at once (separate interfaces set up by separate plugins), then each
 * secondary attachment in the order it was made (its cache entry's time), else the order the pod asked for
 * it; secondary interfaces known to neither come last. Detaching walks that backwards: those unknown ones
 * first, eth0 and then lo last.
 */
export async function forEachAttachment(
  attachments: Attachment[],
  walk: Walk,
  action: (a: Attachment) => Promise<unknown>,
): Promise<AttachmentFailure[]> {
  const failures: AttachmentFailure[] = [];
  for (const step of walkSteps(attachments, walk)) {
    const settled = await Promise.allSettled(step.map((a) => action(a)));
    settled.forEach((s, i) => {
      if (s.status === 'rejected') failures.push({ attachment: step[i]!, error: s.reason as Error });
    });
    if (walk.stopAtFailure && failures.length > 0) break;
  }
  return failures;
}

/** The walk as steps, each a set of attachments run at once. */
export function walkSteps(attachments: Attachment[], walk: Pick<Walk, 'direction' | 'planned'>): Attachment[][] {
  const order = [...madeOrder(attachments), ...(walk.planned ?? [])];
  const rank = (a: Attachment) => attachRank(a.inv.ifName, order);
  if (walk.direction === 'detach') return [...attachments].sort((a, b) => rank(b) - rank(a)).map((a) => [a]);
  const sorted = [...attachments].sort((a, b) => rank(a) - rank(b));
  const first = sorted.filter((a) => isFirst(a.inv.ifName));
  const rest = sorted.filter((a) => !isFirst(a.inv.ifName)).map((a) => [a]);
  return first.length > 0 ? [first, ...rest] : rest;
}

function isFirst(ifName: string): boolean {
  return ifName === LOOPBACK_IFNAME || ifName === POD_IFNAME;
}

/** lo, then eth0, then each secondary interface by its place in `order`; one not in it after all others. */
function attachRank(ifName: string, order: string[]): number {
  if (ifName === LOOPBACK_IFNAME) return -2;
  if (ifName === POD_IFNAME) return -1;
  const i = order.indexOf(ifName);
  return i < 0 ? order.length : i;
}

/** The interfaces whose cache entry says when they were attached, oldest first. */
function madeOrder(attachments: Attachment[]): string[] {
  const timed = attachments.filter((a) => a.attachedAt !== undefined);
  return timed.sort((a, b) => a.attachedAt! - b.attachedAt!).map((a) => a.inv.ifName);
}

/** One failure as it is; several as one error naming `what` and each message. */
export function throwAll(errors: Error[], what: string): void {
  if (errors.length === 1) throw errors[0]!;
  if (errors.length > 1) throw new Internal(`${what}: ${errors.map((e) => e.message).join('; ')}`, { cause: errors });
}

/**
 * What GC tells each network's plugins is still valid: every attachment the cache holds for it of a valid
 * sandbox, whatever its interface (a definition may name the default network too), but loopback; and each
 * valid sandbox's eth0 on the default network. One entry per network name, the default network first.
 */
export function validAttachments(
  defaultNet: NetworkList | undefined,
  defined: NetworkList[],
  entries: CachedAttachment[],
  validSandboxIds: string[],
): { list: NetworkList; attachments: { containerID: string; ifname: string }[] }[] {
  const valid = new Set(validSandboxIds);
  const targets = new Map<string, { list: NetworkList; attachments: { containerID: string; ifname: string }[] }>();
  const target = (list: NetworkList) => {
    const attachments = entries
      .filter((e) => e.networkName === list.name && valid.has(e.containerId) && e.ifName !== LOOPBACK_IFNAME)
      .map((e) => ({ containerID: e.containerId, ifname: e.ifName }));
    targets.set(list.name, { list, attachments });
    return attachments;
  };
  if (defaultNet) {
    const attachments = target(defaultNet);
    for (const containerID of validSandboxIds) {
      const has = attachments.some((a) => a.containerID === containerID && a.ifname === POD_IFNAME);
      if (!has) attachments.push({ containerID, ifname: POD_IFNAME });
    }
  }
  for (const list of defined) if (!targets.has(list.name)) target(list);
  return [...targets.values()];
}
