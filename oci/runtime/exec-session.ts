// Interactive streams into containers: `runc exec` with the client's stdio (pipes, or a PTY through
// minicri-streamhelper), attaching to a container's own stdio through conmon's attach socket, and
// TCP connections from inside a pod's network namespace. Each ends its processes when the client
// goes away (the abort signal).
import { randomBytes } from 'node:crypto';
import { open, readFile, rm } from 'node:fs/promises';
import { constants as fsConstants } from 'node:fs';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { InvalidArgument, Internal } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { SessionStdio, TerminalSize, TerminalSizes } from '../../core/stdio.js';
import { settledWithin } from '../../core/time.js';
import { shellStatus, spawn, type Stdio, type Subprocess } from '../../core/spawn.js';

/** Built by scripts/build-native.sh next to the compiled sources. */
export const STREAM_HELPER = fileURLToPath(new URL('../../streamhelper/minicri-streamhelper', import.meta.url));
/** The helper's own failures (as opposed to the command's status). */
const HELPER_FAILED = 125;
/** How long output may keep flowing after the process has exited (a background child holding the pipes). */
const DRAIN_GRACE_MS = 200;
/** After killing the exec'd process, how long runc gets before it is killed too. */
const KILL_GRACE_MS = 2000;

export interface ExecSessionRequest {
  runtimePath: string;
  /** Global runtime flags (--root=…). */
  runtimeArgs: string[];
  id: string;
  cmd: string[];
  tty: boolean;
  /** Where pid files and console sockets go (exists). */
  workDir: string;
  helperPath?: string;
  log: Logger;
}

/** Runs the command in the container with the client's stdio; resolves with its exit code. */
export async function runExecSession(r: ExecSessionRequest, io: SessionStdio): Promise<number> {
  if (r.cmd.length === 0) throw new InvalidArgument(`exec in container "${r.id}": the command is empty`);
  const tag = randomBytes(6).toString('hex');
  const pidFile = join(r.workDir, `exec-${tag}.pid`);
  const consoleSocket = join(r.workDir, `exec-${tag}.sock`);
  // runc passes a console socket the PTY only when it detaches (-d); the helper then waits for the process.
  const ttyArgs = r.tty ? ['-d', '--tty', '--console-socket', consoleSocket] : [];
  const execArgs = [...r.runtimeArgs, 'exec', '--pid-file', pidFile, ...ttyArgs, r.id, ...r.cmd];
  const started = Date.now();
  const child = r.tty
    ? start(r.helperPath ?? STREAM_HELPER, ['pty', consoleSocket, pidFile, r.runtimePath, ...execArgs], ['pipe', 'pipe', 'pipe', 'pipe'])
    : start(r.runtimePath, execArgs, [io.stdin ? 'pipe' : 'ignore', io.stdout ? 'pipe' : 'ignore', io.stderr ? 'pipe' : 'ignore']);
  const stderrTail: Buffer[] = [];
  wireInput(io.stdin, child.stdin);
  if (child.stdout && io.stdout) child.stdout.pipe(io.stdout, { end: false });
  if (r.tty) {
    // runc's and the helper's own messages: with a terminal there is no stderr stream, show them as output.
    child.stderr!.on('data', (b: Buffer) => { stderrTail.push(b); io.stdout?.write(b); });
    const ctl = child.stdio[3]!;
    ctl.on('error', () => undefined);
    // Each size waits for the helper to take the one before (the write's callback): back-pressure.
    const unfollow = applyResizes(io.resize, (s) => new Promise((resolve) => { ctl.write(`${s.height} ${s.width}\n`, () => resolve()); }));
    child.once('exit', unfollow);
  } else if (child.stderr && io.stderr) {
    child.stderr.pipe(io.stderr, { end: false });
  }

  let killTimer: NodeJS.Timeout | undefined;
  const onAbort = () => {
    r.log.debug({ id: r.id }, 'exec client went away: killing the exec process');
    void killPidFile(pidFile, r.log);
    killTimer = setTimeout(() => child.kill('SIGKILL'), KILL_GRACE_MS);
  };
  io.signal.addEventListener('abort', onAbort, { once: true });
  try {
    const exit = await child.exited;
    await settledWithin(new Promise((resolve) => child.once('close', resolve)), DRAIN_GRACE_MS);
    child.stdout?.unpipe();
    child.stderr?.unpipe();
    child.stdout?.destroy();
    child.stderr?.destroy();
    if (r.tty && exit.code === HELPER_FAILED) {
      throw new Internal(`exec in container "${r.id}": ${Buffer.concat(stderrTail).toString().trim() || 'the terminal helper failed'}`);
    }
    const exitCode = shellStatus(exit);
    r.log.debug({ id: r.id, exitCode, tty: r.tty, ms: Date.now() - started }, 'exec session finished');
    return exitCode;
  } finally {
    io.signal.removeEventListener('abort', onAbort);
    clearTimeout(killTimer);
    io.stdin?.unpipe();
    child.stdin?.destroy();
    await Promise.all([rm(pidFile, { force: true }), rm(consoleSocket, { force: true })]);
  }
}

export interface AttachRequest {
  id: string;
  /** conmon's attach socket. */
  socketPath: string;
  /** conmon's ctl fifo (resize messages). */
  ctlPath: string;
  helperPath?: string;
  log: Logger;
}

/**
 * Attaches the client to the container's stdio until the container exits or the client leaves.
 * Leaving does not stop the container; with stdin_once conmon closes its stdin when the client's
 * stdin ends.
 */
export async function runAttachSession(r: AttachRequest, io: SessionStdio): Promise<void> {
  const child = start(r.helperPath ?? STREAM_HELPER, ['attach', r.socketPath], ['pipe', 'pipe', 'pipe', 'pipe']);
  // stdin stays open while the client has none: its end would count as the client closing stdin.
  wireInput(io.stdin, child.stdin);
  if (io.stdout) child.stdout!.pipe(io.stdout, { end: false });
  const errOut = child.stdio[3]!;
  if (io.stderr) errOut.pipe(io.stderr, { end: false });
  else errOut.resume();
  const helperErr: Buffer[] = [];
  child.stderr!.on('data', (b: Buffer) => helperErr.push(b));
  const unfollow = applyResizes(io.resize, (s) => writeCtl(r.ctlPath, `1 ${s.height} ${s.width}\n`)
    .catch((err: unknown) => r.log.debug({ err, id: r.id }, 'attach resize failed')));
  const onAbort = () => child.kill('SIGTERM');
  io.signal.addEventListener('abort', onAbort, { once: true });
  try {
    const { code } = await child.exited;
    await settledWithin(new Promise((resolve) => child.once('close', resolve)), DRAIN_GRACE_MS);
    if (code === HELPER_FAILED) {
      throw new Internal(`attach to container "${r.id}": ${Buffer.concat(helperErr).toString().trim() || 'the attach helper failed'}`);
    }
  } finally {
    unfollow();
    io.signal.removeEventListener('abort', onAbort);
    io.stdin?.unpipe();
    child.stdin?.destroy();
    child.stdout?.unpipe();
    child.stdout?.destroy();
    errOut.unpipe();
    errOut.destroy();
  }
}

/**
 * A TCP connection to localhost:<port> inside the network namespace at `netnsPath`, as a child
 * process: write to its stdin, read its stdout. It exits 2 with the reason on stderr when nothing
 * listens.
 */
export function connectInNetns(netnsPath: string, port: number, helperPath = STREAM_HELPER): Subprocess {
  return spawn(helperPath, ['connect', netnsPath, String(port)], { stdio: ['pipe', 'pipe', 'pipe'] });
}

/**
 * Applies the client's terminal sizes one at a time and only the newest: sizes arriving while one is being
 * applied replace each other, and the last of them is applied next. A client sending resizes without end
 * (tens of thousands in one message) then costs one application in flight, not one write or thread-pool
 * round trip each. `apply` must not reject. Returns the unsubscribe.
 */
export function applyResizes(sizes: TerminalSizes, apply: (size: TerminalSize) => Promise<void>): () => void {
  let newest: TerminalSize | undefined;
  let applying = false;
  let stopped = false;
  const drain = async () => {
    applying = true;
    while (newest && !stopped) {
      const size = newest;
      newest = undefined;
      await apply(size);
    }
    applying = false;
  };
  const unfollow = sizes.follow((size) => {
    newest = size;
    if (!applying) void drain();
  });
  return () => {
    stopped = true;
    unfollow();
  };
}

function wireInput(from: Readable | null, to: Writable | null): void {
  if (!from || !to) return;
  to.on('error', () => undefined); // the process went away; its exit reports the outcome
  from.pipe(to);
}

function start(file: string, args: string[], stdio: Stdio[]): Subprocess {
  try {
    return spawn(file, args, { stdio });
  } catch (err) {
    throw new Internal(`cannot run ${file}: ${(err as Error).message}`, { cause: err });
  }
}

async function killPidFile(pidFile: string, log: Logger): Promise<void> {
  try {
    const pid = Number.parseInt(await readFile(pidFile, 'utf8'), 10);
    if (pid > 1) process.kill(pid, 'SIGKILL');
  } catch (err) {
    // Not started yet or already gone: killing runc (after the grace) covers the first case.
    log.debug({ err, pidFile }, 'could not kill the exec process by its pid file');
  }
}

/** Writes one message to conmon's ctl fifo without blocking when conmon is gone. */
async function writeCtl(path: string, message: string): Promise<void> {
  const fh = await open(path, fsConstants.O_WRONLY | fsConstants.O_NONBLOCK);
  try {
    await fh.write(message);
  } finally {
    await fh.close();
  }
}
