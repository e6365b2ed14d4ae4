// User resolution against the container's own /etc/passwd and /etc/group (text read by the
// caller from the rootfs), following the forms images and CRI use: uid, name, uid:gid,
// name:group, and the mixed ones.
import { InvalidArgument } from '../../../core/errors.js';
import type { SpecOpt } from './opts.js';
import { processOf } from './opts.js';

export interface PasswdEntry { name: string; uid: number; gid: number }
export interface GroupEntry { name: string; gid: number; members: string[] }

const MAX_ID = 2 ** 32 - 2; // (uid_t)-1 is "no id" to the kernel

function parseId(text: string): number | undefined {
  if (!/^\d+$/.test(text)) return undefined;
  const n = Number(text);
  return n <= MAX_ID ? n : undefined;
}

/** Lines of `name:password:uid:gid:gecos:home:shell`; comments and malformed lines are skipped. */
export function parsePasswd(text: string): PasswdEntry[] {
  const out: PasswdEntry[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '' || line.startsWith('#')) continue;
    const f = line.split(':');
    const uid = parseId(f[2] ?? '');
    const gid = parseId(f[3] ?? '');
    if (f.length < 4 || !f[0] || uid === undefined || gid === undefined) continue;
    out.push({ name: f[0], uid, gid });
  }
  return out;
}

/** Lines of `name:password:gid:member,member`. */
export function parseGroup(text: string): GroupEntry[] {
  const out: GroupEntry[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '' || line.startsWith('#')) continue;
    const f = line.split(':');
    const gid = parseId(f[2] ?? '');
    if (f.length < 3 || !f[0] || gid === undefined) continue;
    const members = (f[3] ?? '').split(',').map((m) => m.trim()).filter((m) => m !== '');
    out.push({ name: f[0], gid, members });
  }
  return out;
}

export interface UserRequest {
  /** CRI run_as_user (wins over everything else when set). */
  runAsUser?: number;
  /** CRI run_as_username. */
  runAsUsername?: string;
  /** CRI run_as_group: only valid together with a user. */
  runAsGroup?: number;
  /** The image config's User string: "", "uid", "name", "uid:gid", "name:group"... */
  imageUser?: string;
  /** CRI supplemental_groups, added after the ones /etc/group gives the user. */
  supplementalGroups?: readonly number[];
  /** CRI supplemental_groups_policy Strict: ignore /etc/group memberships. */
  strictSupplementalGroups?: boolean;
}

export interface ResolvedUser { uid: number; gid: number; additionalGids: number[] }

function checkId(what: string, n: number): number {
  if (!Number.isInteger(n) || n < 0 || n > MAX_ID) {
    throw new InvalidArgument(`${what} ${n} is out of range: use an id between 0 and ${MAX_ID}`);
  }
  return n;
}

/**
 * Resolves the process identity. Names must exist in the container's files; numeric ids need not
 * (a uid unknown to /etc/passwd runs with gid 0, as in Docker and containerd). The primary gid is
 * always the first additional gid so setgroups() cannot leave the process in the caller's groups.
 */
export function resolveUser(req: UserRequest, passwdText = '', groupText = ''): ResolvedUser {
  const passwd = parsePasswd(passwdText);
  const groups = parseGroup(groupText);

  const byName = (name: string): PasswdEntry => {
    const entry = passwd.find((p) => p.name === name);
    if (!entry) {
      throw new InvalidArgument(`user "${name}" is not in the image's /etc/passwd: use a numeric uid or add the user to the image`);
    }
    return entry;
  };
  const fromUid = (uid: number): { uid: number; gid: number; name?: string } => {
    const entry = passwd.find((p) => p.uid === uid);
    return { uid, gid: entry?.gid ?? 0, name: entry?.name };
  };
  const groupId = (text: string): number => {
    const id = parseId(text);
    if (id !== undefined) return id;
    const g = groups.find((x) => x.name === text);
    if (!g) {
      throw new InvalidArgument(`group "${text}" is not in the image's /etc/group: use a numeric gid or add the group to the image`);
    }
    return g.gid;
  };

  let user: { uid: number; gid: number; name?: string };
  if (req.runAsUser !== undefined) {
    user = fromUid(checkId('run_as_user', req.runAsUser));
  } else if (req.runAsUsername) {
    user = byName(req.runAsUsername);
  } else if (req.imageUser) {
    const [u = '', g, ...rest] = req.imageUser.split(':');
    if (u === '' || g === '' || rest.length > 0) {
      throw new InvalidArgument(`image user "${req.imageUser}" is malformed: expected user, uid, user:group or uid:gid`);
    }
    const uid = parseId(u);
    user = uid !== undefined ? fromUid(uid) : byName(u);
    if (g !== undefined) user = { ...user, gid: groupId(g) };
  } else {
    user = fromUid(0);
  }

  if (req.runAsGroup !== undefined) {
    if (req.runAsUser === undefined && !req.runAsUsername) {
      throw new InvalidArgument('run_as_group is set without run_as_user or run_as_username: set a user too');
    }
    user = { ...user, gid: checkId('run_as_group', req.runAsGroup) };
  }

  const additional = [user.gid];
  const add = (gid: number): void => { if (!additional.includes(gid)) additional.push(gid); };
  if (user.name !== undefined && !req.strictSupplementalGroups) {
    for (const g of groups) if (g.members.includes(user.name)) add(g.gid);
  }
  for (const gid of req.supplementalGroups ?? []) add(checkId('supplemental group', gid));
  return { uid: user.uid, gid: user.gid, additionalGids: additional };
}

export function withUser(user: ResolvedUser): SpecOpt {
  return (spec) => {
    processOf(spec).user = { uid: user.uid, gid: user.gid, additionalGids: [...user.additionalGids] };
  };
}
