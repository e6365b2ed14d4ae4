// The daemon's mounts, unmounts and new netns pins, made by one long-lived minicri-mounter process
// (netns/mounter/mounter.c) rather than a mount(8), umount(8) or ip(8) process each. Forking the daemon
// and starting those programs cost about 2 ms a call and most of the CPU a pod storm spends on them;
// the helper answers in a fraction of that. It is started on first use and again after it dies.
import { readFile } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { getSystemErrorName } from 'node:util';
import { Internal } from '../core/errors.js';
import { spawn, type Subprocess } from '../core/spawn.js';
import { mountPoints } from './mountinfo.js';

export const MOUNTER = fileURLToPath(new URL('../mounter/minicri-mounter', import.meta.url));

/** mount(2) flags minicri passes (linux/mount.h). */
export const MS = { NOSUID: 0x2, NODEV: 0x4, NOEXEC: 0x8, BIND: 0x1000 } as const;
/** umount2(2): detach now, free when the last user goes. */
const MNT_DETACH = 0x2;

/** A failed system call in the helper, with its errno name (EBUSY, EINVAL, ...) as `code`. */
export class MountError extends Error {
  constructor(message: string, readonly code: string) {
    super(message);
  }
}

type Op = 'mount' | 'umount' | 'netns' | 'idmap' | 'probe';

/** One request as the helper reads it: NUL-terminated fields. Pure. */
export function encodeRequest(id: number, op: Op, args: readonly string[]): Buffer {
  for (const a of args) if (a.includes('\0')) throw new Internal(`${op}: argument ${JSON.stringify(a)} contains a NUL byte`);
  return Buffer.from([String(id), op, ...args].map((f) => `${f}\0`).join(''), 'utf8');
}

export interface Reply {
  id: number;
  /** 0 when the call succeeded. */
  errno: number;
  message: string;
}

/** One answer line, `<id> <errno> <message>`, without its newline. Pure. */
export function parseReply(line: string): Reply {
  const m = /^(\d+) (\d+) ?(.*)$/.exec(line);
  if (!m) throw new Internal(`minicri-mounter sent an unreadable answer "${line}"`);
  return { id: Number(m[1]), errno: Number(m[2]), message: m[3]! };
}

interface Pending {
  what: string;
  resolve: () => void;
  reject: (err: Error) => void;
}

/** One helper process and the requests it has not answered yet. */
class Helper {
  private readonly pending = new Map<number, Pending>();
  private readonly child: Subprocess;
  /** The pipes are sockets underneath: they can be unref'd so an idle helper keeps nobody alive. */
  private readonly out: Socket;
  private partial = '';
  private stderr = '';

  /** onExit: it can take no more requests (exited or could not start). */
  constructor(private readonly onExit: (h: Helper) => void) {
    let child: Subprocess;
    try {
      child = spawn(MOUNTER, [], { stdio: ['pipe', 'pipe', 'pipe'] });
    } catch (err) {
      throw new Internal(`cannot run ${MOUNTER}: ${(err as Error).message} (npm run build makes it)`, { cause: err });
    }
    this.child = child;
    this.out = child.stdout!;
    this.hold(false);
    child.stderr!.unref();
    child.stdin!.unref();
    this.out.setEncoding('utf8').on('data', (chunk: string) => this.answered(chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => { this.stderr = (this.stderr + chunk).slice(-1000); });
    for (const pipe of [child.stdin!, child.stdout!, child.stderr!]) pipe.on('error', () => { /* reported by 'close' */ });
    child.on('exit', () => this.onExit(this));
    // 'close' comes once the helper and its children have all closed stdout: every answer is in by then.
    child.on('close', (code: number | null, signal: NodeJS.Signals | null) =>
      this.gone(`minicri-mounter exited (${signal ?? code})${this.stderr ? `: ${this.stderr.trim()}` : ''}`),
    );
  }

  send(id: number, request: Buffer, p: Pending): void {
    // A request in flight keeps the process alive (until answered or the helper's exit is seen);
    // an idle helper does not.
    if (this.pending.size === 0) this.hold(true);
    this.pending.set(id, p);
    this.child.stdin!.write(request);
  }

  private answered(chunk: string): void {
    const lines = (this.partial + chunk).split('\n');
    this.partial = lines.pop()!;
    for (const line of lines) {
      let reply: Reply;
      try {
        reply = parseReply(line);
      } catch (err) {
        // Its children may still be mounting: 'close' settles the rest once they have answered.
        this.stderr = (err as Error).message;
        this.child.kill('SIGKILL');
        return;
      }
      const p = this.pending.get(reply.id);
      if (!p) continue;
      this.pending.delete(reply.id);
      if (this.pending.size === 0) this.hold(false);
      if (reply.errno === 0) p.resolve();
      else {
        const code = getSystemErrorName(-reply.errno);
        p.reject(new MountError(`${p.what}: ${reply.message} (${code})`, code));
      }
    }
  }

  private hold(on: boolean): void {
    for (const h of [this.child, this.out]) if (on) h.ref(); else h.unref();
  }

  /** What it had not answered fails. */
  private gone(why: string): void {
    this.onExit(this);
    const pending = [...this.pending.values()];
    if (pending.length > 0) this.hold(false);
    this.pending.clear();
    for (const p of pending) p.reject(new Internal(`${p.what}: ${why}`));
  }
}

class Mounter {
  private helper?: Helper;
  private nextId = 1;

  async call(op: Op, args: readonly string[], what: string): Promise<void> {
    const id = this.nextId++;
    const request = encodeRequest(id, op, args);
    const helper = (this.helper ??= new Helper((h) => { if (this.helper === h) this.helper = undefined; }));
    return new Promise<void>((resolve, reject) => helper.send(id, request, { what, resolve, reject }));
  }
}

const mounter = new Mounter();

export interface MountRequest {
  source: string;
  target: string;
  fstype?: string;
  flags?: number;
  data?: string;
  /** Directory that relative paths in `data` (overlay lowerdirs) resolve against. */
  cwd?: string;
}

export function mount(m: MountRequest): Promise<void> {
  const what = `mount ${m.fstype || m.source} on ${m.target}`;
  if (m.flags !== undefined && !(Number.isSafeInteger(m.flags) && m.flags >= 0)) {
    return Promise.reject(new Internal(`${what}: flags ${m.flags} are not a mount(2) flag set`));
  }
  return mounter.call('mount', [m.source, m.target, m.fstype ?? '', String(m.flags ?? 0), m.data ?? '', m.cwd ?? ''], what);
}

export function unmount(target: string, opts: { lazy?: boolean } = {}): Promise<void> {
  return mounter.call('umount', [target, String(opts.lazy ? MNT_DETACH : 0)], `unmount ${target}`);
}

/** As `ip netns add`: makes `dir` a shared mount point and pins a new network namespace at `pin`,
 *  which must not exist yet. */
export function pinNetns(dir: string, pin: string): Promise<void> {
  return mounter.call('netns', [dir, pin], `pin a new network namespace at ${pin}`);
}

/** One range of an id mapping: the `size` ids from `containerId` in the namespace are those from `hostId` outside. */
export interface IdRange { containerId: number; hostId: number; size: number }

/** A mapping in the text of /proc/<pid>/uid_map: one "inside outside size" line per range. Pure. */
export function idMapText(ranges: readonly IdRange[]): string {
  return ranges.map((r) => `${r.containerId} ${r.hostId} ${r.size}\n`).join('');
}

/**
 * An id-mapped bind mount of `source` on `target` (an existing directory or file): files owned by id N
 * on disk appear owned by the host id N maps to, so a user namespace with the same mapping sees them
 * with their own owners. `recursive` clones and maps the submounts too (each filesystem must allow it).
 */
export function idmapMount(
  source: string,
  target: string,
  maps: { uids: readonly IdRange[]; gids: readonly IdRange[] },
  opts: { recursive?: boolean } = {},
): Promise<void> {
  const args = [source, target, idMapText(maps.uids), idMapText(maps.gids), opts.recursive ? '1' : '0'];
  return mounter.call('idmap', args, `id-mapped mount of ${source} on ${target}`);
}

/**
 * Whether this kernel has mount_setattr(2) and can id-map a mount of `dir`: 'ok', or the step that is
 * missing ('mount_setattr' when the call itself is absent, else 'userns', 'open_tree' or 'idmap').
 */
export async function probeIdmap(dir: string): Promise<{ ok: true } | { ok: false; step: string; reason: string }> {
  try {
    await mounter.call('probe', [dir], `id-mapped mount probe of ${dir}`);
    return { ok: true };
  } catch (err) {
    const message = (err as Error).message;
    const step = /: (mount_setattr|userns|open_tree|idmap): /.exec(message)?.[1] ?? 'unknown';
    return { ok: false, step, reason: message };
  }
}

/** Unmounts `target`; false when it was no mount point (EINVAL) or does not exist (ENOENT). */
export async function unmountIfMounted(target: string, opts: { lazy?: boolean } = {}): Promise<boolean> {
  try {
    await unmount(target, opts);
    return true;
  } catch (err) {
    if (err instanceof MountError && (err.code === 'EINVAL' || err.code === 'ENOENT')) return false;
    throw err;
  }
}

/** Whether `target` (absolute, resolved) is a mount point in this process's mount namespace now. */
export async function isMounted(target: string): Promise<boolean> {
  return (await mountedPaths()).has(target);
}

/** The daemon's mount points now, for checking many paths against one reading. */
export async function mountedPaths(): Promise<Set<string>> {
  return mountPoints(await readFile('/proc/self/mountinfo', 'utf8'));
}
