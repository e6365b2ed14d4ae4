// The lowest oom_score_adj a container spec may ask for on this host.
//
// Lowering a process's oom_score_adj below its current value needs CAP_SYS_RESOURCE. When the
// daemon's capability bounding set lacks it (seen in some VMs even for root), runc cannot apply a
// spec value below the daemon's own and fails with an opaque "can't get final child's PID from
// pipe: EOF". Callers clamp spec values to this floor instead (and log once when they do).
import { readFile } from 'node:fs/promises';
import { Internal } from '../../core/errors.js';

export const CAP_SYS_RESOURCE = 24;
export const OOM_SCORE_ADJ_MIN = -1000;

export interface OomScoreLimits {
  /** The daemon's own /proc/self/oom_score_adj. */
  own: number;
  /** Whether CAP_SYS_RESOURCE is in the daemon's capability bounding set. */
  hasSysResource: boolean;
  /** The minimum oom_score_adj to put in OCI specs. */
  minAllowed: number;
}

/** Whether capability `cap` is set in a hex capability mask (as in /proc/<pid>/status CapBnd). */
export function hasCapability(hexMask: string, cap: number): boolean {
  if (!/^[0-9a-fA-F]+$/.test(hexMask)) throw new Internal(`not a hex capability mask: "${hexMask}"`);
  return ((BigInt(`0x${hexMask}`) >> BigInt(cap)) & 1n) === 1n;
}

/** The CapBnd mask from the text of /proc/<pid>/status. */
export function parseCapBnd(statusText: string): string {
  const m = /^CapBnd:\s*([0-9a-fA-F]+)\s*$/m.exec(statusText);
  if (!m) throw new Internal('no CapBnd line in /proc/self/status');
  return m[1]!;
}

export function computeOomScoreLimits(ownOomScoreAdj: number, capBndHex: string): OomScoreLimits {
  const hasSysResource = hasCapability(capBndHex, CAP_SYS_RESOURCE);
  return { own: ownOomScoreAdj, hasSysResource, minAllowed: hasSysResource ? OOM_SCORE_ADJ_MIN : ownOomScoreAdj };
}

/** Clamp a requested oom_score_adj to the allowed floor; `clamped` tells the caller to log it. */
export function clampOomScoreAdj(requested: number, limits: OomScoreLimits): { value: number; clamped: boolean } {
  return requested < limits.minAllowed ? { value: limits.minAllowed, clamped: true } : { value: requested, clamped: false };
}

/** Read this process's limits; call once at daemon start. */
export async function readOomScoreLimits(proc = '/proc/self'): Promise<OomScoreLimits> {
  const [adj, status] = await Promise.all([readFile(`${proc}/oom_score_adj`, 'utf8'), readFile(`${proc}/status`, 'utf8')]);
  const own = Number.parseInt(adj.trim(), 10);
  if (!Number.isInteger(own)) throw new Internal(`unreadable ${proc}/oom_score_adj: "${adj.trim()}"`);
  return computeOomScoreLimits(own, parseCapBnd(status));
}
