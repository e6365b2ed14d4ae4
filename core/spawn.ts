// Every program the daemon runs (runc, conmon, CNI plugins, iproute2, iptables, tar) starts here, through
// posix_spawn in the daemon's addon (core/posix.ts), not node:child_process. Node forks the daemon for each child,
// and a fork makes every writable page of the daemon copy-on-write: the next write to each takes a page fault, on
// these VMs 13-16 µs. After a hundred pods a 100 MB pull took 12-13 thousand such faults, a third of its time; a
// fork also holds the event loop for a time that grows with the daemon's size. posix_spawn starts the child from
// a clone that shares the daemon's memory until it execs, and marks no page (bench/lib/fault-cost.ts measures both).
import { EventEmitter } from 'node:events';
import { closeSync } from 'node:fs';
import { Socket } from 'node:net';
import { constants, endianness } from 'node:os';
import { CappedBuffer } from './capped-buffer.js';
import { InvalidArgument } from './errors.js';
import { posix, STDIO_INHERIT, STDIO_NULL, STDIO_PAIR } from './posix.js';

/** What the child's fd of that index is: a pipe to the daemon, /dev/null, or the daemon's own. */
export type Stdio = 'pipe' | 'ignore' | 'inherit';

export interface SpawnOptions {
  cwd?: string;
  /** The child's whole environment; the daemon's when absent. */
  env?: NodeJS.ProcessEnv;
  /**
   * The child's fds from 0 up (0 to 2 are /dev/null where not given; 'inherit' only for those); every other fd is
   * closed in it. Default: no stdin, stdout and stderr piped.
   */
  stdio?: readonly Stdio[];
  /** A session of its own (setsid), so its process group can be signalled as a whole. */
  detached?: boolean;
}

export interface Exit {
  /** The exit status, or null when a signal ended it. */
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** Signal numbers to names; the first of two names for one number (SIGABRT, not SIGIOT). */
const SIGNAL_NAMES = new Map<number, NodeJS.Signals>(
  Object.entries(constants.signals).reverse().map(([name, n]) => [n, name as NodeJS.Signals]),
);

/** A wait(2) status as the exit it tells of; -1 (not known: reaped elsewhere) is neither code nor signal. Pure. */
export function decodeWaitStatus(status: number): Exit {
  if (status === -1) return { code: null, signal: null };
  const low = status & 0x7f;
  if (low === 0) return { code: (status >> 8) & 0xff, signal: null };
  return { code: null, signal: SIGNAL_NAMES.get(low) ?? null };
}

/** An exit as a shell reports it: the status, or 128 plus the number of the signal that ended it. Pure. */
export function shellStatus(exit: Exit): number {
  return exit.code ?? 128 + (exit.signal ? constants.signals[exit.signal] : 0);
}

/**
 * Where the addon's threads report exits: one pipe, read here, whose reports go to the child they name. Its
 * reader keeps the event loop alive only while a child that holds it runs (as child_process's children do).
 */
class ExitReports {
  private readonly children = new Map<number, Subprocess>();
  private readonly reader: Socket;
  readonly writeFd: number;
  private partial = Buffer.alloc(0);
  private nextTag = 1;
  private held = 0;

  constructor() {
    const [readFd, writeFd] = posix().exitPipe();
    this.writeFd = writeFd;
    this.reader = new Socket({ fd: readFd, readable: true, writable: false });
    this.reader.unref();
    const read = endianness() === 'LE' ? (b: Buffer, i: number) => b.readInt32LE(i) : (b: Buffer, i: number) => b.readInt32BE(i);
    this.reader.on('data', (chunk: Buffer) => {
      const b = this.partial.length > 0 ? Buffer.concat([this.partial, chunk]) : chunk;
      let i = 0;
      for (; i + 8 <= b.length; i += 8) {
        const tag = read(b, i);
        const child = this.children.get(tag);
        this.children.delete(tag);
        try {
          child?.ended(read(b, i + 4));
        } catch (err) {
          // A listener's throw is the listener's: it must not cost the other children their reports.
          process.nextTick(() => { throw err; });
        }
      }
      this.partial = Buffer.from(b.subarray(i));
    });
    this.reader.on('error', (err) => { throw err; });
    // As execa did: what was started for a call, not to outlive the daemon, ends with it.
    process.once('exit', () => {
      for (const child of this.children.values()) {
        try {
          if (!child.detached) child.kill('SIGTERM');
        } catch {
          // the others still get theirs
        }
      }
    });
  }

  /** A tag for a child about to start, none of those still running; `add` it once it has. */
  tag(): number {
    do this.nextTag = this.nextTag >= 0x7fffffff ? 1 : this.nextTag + 1;
    while (this.children.has(this.nextTag));
    return this.nextTag;
  }

  add(tag: number, child: Subprocess): void {
    this.children.set(tag, child);
  }

  hold(on: boolean): void {
    this.held += on ? 1 : -1;
    if (this.held === (on ? 1 : 0)) {
      if (on) this.reader.ref();
      else this.reader.unref();
    }
  }
}

let exitReports: ExitReports | undefined;

/**
 * A running child. Emits 'exit' (code, signal) once it has ended, and 'close' (code, signal) once it has ended
 * and its pipes have closed too; pipes are net.Sockets, stdio[0] writable, stdio[1] and [2] readable, any further
 * one both.
 */
export class Subprocess extends EventEmitter {
  readonly pid: number;
  readonly stdio: (Socket | null)[];
  exitCode: number | null = null;
  signalCode: NodeJS.Signals | null = null;
  /** Resolves when the child has ended. */
  readonly exited: Promise<Exit>;
  readonly detached: boolean;
  private resolveExit!: (exit: Exit) => void;
  private readonly reports: ExitReports;
  private held = true;
  /** Names this very process until its exit is reported, then closed: no signal reaches a reused pid. */
  private pidfd: number;

  constructor(readonly file: string, args: readonly string[], opts: SpawnOptions = {}) {
    super();
    const stdio = [...opts.stdio ?? ['ignore', 'pipe', 'pipe']];
    while (stdio.length < 3) stdio.push('ignore');
    if (stdio.indexOf('inherit', 3) >= 0) throw new TypeError(`cannot run ${file}: only fds 0 to 2 can be inherited`);
    const env = Object.entries(opts.env ?? process.env).flatMap(([k, v]) => (v === undefined ? [] : [`${k}=${v}`]));
    const nul = [file, ...args, ...env, opts.cwd ?? ''].find((s) => s.includes('\0'));
    if (nul !== undefined) throw new InvalidArgument(`cannot run ${file}: ${JSON.stringify(nul)} holds a NUL byte`);
    const kinds = stdio.map((s) => (s === 'pipe' ? STDIO_PAIR : s === 'ignore' ? STDIO_NULL : STDIO_INHERIT));
    this.detached = opts.detached ?? false;
    this.exited = new Promise((resolve) => { this.resolveExit = resolve; });
    this.reports = exitReports ??= new ExitReports();
    const tag = this.reports.tag();
    // Looked up in the daemon's PATH (posix_spawnp), not in opts.env's.
    const [pid, pidfd, ...fds] = posix().spawn(file, [file, ...args], env, opts.cwd, kinds, this.detached, this.reports.writeFd, tag);
    this.pid = pid;
    this.pidfd = pidfd;
    this.reports.add(tag, this);
    this.reports.hold(true);
    this.stdio = stdio.map((s, i) => {
      if (s !== 'pipe') return null;
      return new Socket({ fd: fds.shift()!, readable: i !== 0, writable: i === 0 || i > 2 });
    });
  }

  get stdin(): Socket | null { return this.stdio[0] ?? null; }
  get stdout(): Socket | null { return this.stdio[1] ?? null; }
  get stderr(): Socket | null { return this.stdio[2] ?? null; }

  /** Signals the child unless it has ended; whether a signal was sent. */
  kill(signal: NodeJS.Signals | number = 'SIGTERM'): boolean {
    if (this.pidfd < 0) return false;
    return posix().signal(this.pidfd, typeof signal === 'number' ? signal : constants.signals[signal]);
  }

  /** Lets the daemon's event loop end while the child runs on. */
  unref(): void {
    this.hold(false);
  }

  /** Keeps the event loop alive until the child has ended (as at its start). */
  ref(): void {
    if (this.pidfd >= 0) this.hold(true);
  }

  private hold(on: boolean): void {
    if (this.held === on) return;
    this.held = on;
    this.reports.hold(on);
  }

  /** The exit report came: `status` as wait(2) gave it. */
  ended(status: number): void {
    const exit = decodeWaitStatus(status);
    this.exitCode = exit.code;
    this.signalCode = exit.signal;
    const pidfd = this.pidfd;
    this.pidfd = -1;
    try {
      closeSync(pidfd);
    } catch {
      // Nothing to signal through any more either way.
    }
    this.hold(false);
    this.resolveExit(exit);
    // Nothing reads what is still written to an ended child. Its other pipes close when it (and whatever it
    // left holding them) has closed its ends and what they hold is read: as child_process does, what nobody reads
    // any more (never piped, or unpiped and paused when its destination closed) is drained.
    this.stdin?.destroy();
    process.nextTick(() => {
      for (const s of this.stdio.slice(1)) if (s?.readable && s.listenerCount('readable') === 0) s.resume();
    });
    void this.closeAfterPipes(exit);
    this.emit('exit', exit.code, exit.signal);
  }

  private async closeAfterPipes(exit: Exit): Promise<void> {
    await Promise.all(this.stdio.map((s) => (s && !s.closed ? new Promise((resolve) => s.once('close', resolve)) : undefined)));
    this.emit('close', exit.code, exit.signal);
  }
}

/** Starts `file` (looked up in PATH when it has no slash); throws with the errno's code when it cannot be run. */
export function spawn(file: string, args: readonly string[], opts?: SpawnOptions): Subprocess {
  return new Subprocess(file, args, opts);
}

export interface RunOptions extends Omit<SpawnOptions, 'stdio'> {
  /** Written to the child's stdin, which is then closed; without it stdin is /dev/null. */
  input?: string | Buffer;
  /** Bytes kept of each of stdout and stderr; the rest is read and dropped. Default 16 MiB. */
  maxOutput?: number;
  /** Ends the child (SIGKILL, its whole group when detached) when aborted. */
  signal?: AbortSignal;
}

export interface RunResult extends Exit {
  stdout: string;
  stderr: string;
  /** Whether it was ended because `signal` aborted. */
  aborted: boolean;
}

const DEFAULT_MAX_OUTPUT = 16 * 1024 * 1024;

/**
 * Runs a program to its end and collects what it printed. Resolves however it exits (check `code`); rejects only
 * when it cannot be started.
 */
export async function run(file: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
  const child = spawn(file, args, { ...opts, stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
  const done = outputOf(child, opts.maxOutput);
  // A child that exits without reading its input makes the write fail with EPIPE: its exit says what happened.
  if (opts.input !== undefined) child.stdin!.on('error', () => undefined).end(opts.input);
  let aborted = false;
  const abort = () => {
    aborted = true;
    if (!opts.detached) return void child.kill('SIGKILL');
    try {
      // The group may outlive its leader (a plugin's own children holding the pipes); its id is not reused while
      // any member is left.
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  };
  if (opts.signal?.aborted) abort();
  else opts.signal?.addEventListener('abort', abort, { once: true });
  try {
    return { ...await done, aborted };
  } finally {
    opts.signal?.removeEventListener('abort', abort);
  }
}

/** What a child with piped stdout and stderr printed (up to `maxOutput` bytes of each, default 16 MiB), once it has closed. */
export async function outputOf(child: Subprocess, maxOutput = DEFAULT_MAX_OUTPUT): Promise<Exit & { stdout: string; stderr: string }> {
  const out = new CappedBuffer(maxOutput);
  const err = new CappedBuffer(maxOutput);
  child.stdout!.on('data', (b: Buffer) => out.push(b));
  child.stderr!.on('data', (b: Buffer) => err.push(b));
  const exit = await new Promise<Exit>((resolve) => {
    child.once('close', (code: number | null, signal: NodeJS.Signals | null) => resolve({ code, signal }));
  });
  return { ...exit, stdout: out.toBuffer().toString('utf8'), stderr: err.toBuffer().toString('utf8') };
}
