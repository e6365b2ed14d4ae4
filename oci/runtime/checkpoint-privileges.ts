// The privileges of a restored container's processes. `runc restore` does not start them from the spec: CRIU
// rebuilds each process's credentials (uids, gids, capability sets, no_new_privs, seccomp) as its images say,
// and the images come from an archive. So once restored, every process of the container is compared with the
// spec the request built, and one that holds more than the spec grants fails the restore.
import { readdir, readFile } from 'node:fs/promises';
import { KNOWN_CAPABILITIES } from './spec/capabilities.js';
import type { Spec } from './spec/types.js';

/** What /proc/<pid>/status says of a process's privileges. */
export interface LivePrivileges {
  capBnd: bigint;
  capEff: bigint;
  capPrm: bigint;
  /** Real, effective, saved and filesystem ids. */
  uids: number[];
  gids: number[];
  noNewPrivs: boolean;
  /** 0 none, 1 strict, 2 filter. */
  seccomp: number;
}

/** The privileges in the text of /proc/<pid>/status; undefined when a line is missing (not a process's status). Pure. */
export function parseProcStatus(text: string): LivePrivileges | undefined {
  const field = (name: string) => new RegExp(`^${name}:\\s*(.*)$`, 'm').exec(text)?.[1]?.trim();
  const [capBnd, capEff, capPrm, uid, gid, nnp, seccomp] = ['CapBnd', 'CapEff', 'CapPrm', 'Uid', 'Gid', 'NoNewPrivs', 'Seccomp'].map(field);
  if ([capBnd, capEff, capPrm, uid, gid, nnp, seccomp].some((v) => v === undefined)) return undefined;
  const ids = (v: string) => v.split(/\s+/).map(Number);
  return {
    capBnd: BigInt(`0x${capBnd}`), capEff: BigInt(`0x${capEff}`), capPrm: BigInt(`0x${capPrm}`),
    uids: ids(uid!), gids: ids(gid!), noNewPrivs: nnp === '1', seccomp: Number(seccomp),
  };
}

/** The kernel capability mask of capability names (KNOWN_CAPABILITIES lists them by bit number). Pure. */
export function capabilityMask(names: readonly string[] | undefined): bigint {
  const bits = [...KNOWN_CAPABILITIES];
  return (names ?? []).reduce((mask, name) => {
    const bit = bits.indexOf(name);
    return bit < 0 ? mask : mask | (1n << BigInt(bit));
  }, 0n);
}

function capNames(mask: bigint): string {
  const bits = [...KNOWN_CAPABILITIES];
  const names: string[] = [];
  for (let bit = 0; mask >> BigInt(bit) > 0n; bit++) {
    if ((mask >> BigInt(bit)) & 1n) names.push(bits[bit] ?? `capability ${bit}`);
  }
  return names.join(', ');
}

/**
 * How a live process holds more than `spec` grants, one phrase each ([] when it holds no more): capabilities
 * outside the spec's bounding, effective or permitted sets; an id other than the spec's user and group (a
 * process of a root spec may have dropped to any); no_new_privs or seccomp off where the spec has them on. Pure.
 */
export function privilegesBeyondSpec(live: LivePrivileges, spec: Pick<Spec, 'process' | 'linux'>): string[] {
  const out: string[] = [];
  const caps = spec.process?.capabilities;
  for (const [set, have, granted] of [
    ['bounding', live.capBnd, caps?.bounding], ['effective', live.capEff, caps?.effective], ['permitted', live.capPrm, caps?.permitted],
  ] as const) {
    const extra = have & ~capabilityMask(granted);
    if (extra !== 0n) out.push(`${set} capabilities ${capNames(extra)} that the request does not grant`);
  }
  const user = spec.process?.user ?? { uid: 0, gid: 0 };
  if (user.uid !== 0 && live.uids.some((id) => id !== user.uid)) {
    out.push(`uids ${live.uids.join(' ')} where the request runs as ${user.uid}`);
  }
  if (user.uid !== 0 && live.gids.some((id) => id !== user.gid)) {
    out.push(`gids ${live.gids.join(' ')} where the request's group is ${user.gid}`);
  }
  if (spec.process?.noNewPrivileges && !live.noNewPrivs) out.push('no_new_privs off where the request sets it');
  if (spec.linux?.seccomp && live.seccomp === 0) out.push('no seccomp filter where the request has one');
  return out;
}

/** `pid` and its descendants, by the kernel's children lists (processes that exit meanwhile are left out). */
async function processTree(pid: number): Promise<number[]> {
  const out: number[] = [];
  for (const todo = [pid]; todo.length > 0;) {
    const p = todo.pop()!;
    out.push(p);
    const tasks = await readdir(`/proc/${p}/task`).catch(() => [] as string[]);
    for (const task of tasks) {
      const children = await readFile(`/proc/${p}/task/${task}/children`, 'utf8').catch(() => '');
      todo.push(...children.split(/\s+/).filter(Boolean).map(Number));
    }
  }
  return out;
}

/** What every process of a restored container (its init `pid` and descendants) holds beyond `spec`, per process. */
export async function restoredPrivilegesBeyondSpec(pid: number, spec: Pick<Spec, 'process' | 'linux'>): Promise<string[]> {
  const out: string[] = [];
  for (const p of await processTree(pid)) {
    const status = await readFile(`/proc/${p}/status`, 'utf8').catch(() => undefined);
    const live = status === undefined ? undefined : parseProcStatus(status);
    if (!live) continue; // gone since it was listed
    out.push(...privilegesBeyondSpec(live, spec).map((why) => `process ${p} holds ${why}`));
  }
  return out;
}
