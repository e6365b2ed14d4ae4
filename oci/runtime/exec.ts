// ExecSync: run a command in a running container with `runc exec`, capture stdout and stderr
// separately, enforce a timeout and cap the output kept, and report the exit code.
//
// runc exec inherits the container's process spec (env, cwd, user, capabilities) and only swaps the
// args. The exec'd process writes into our pipes, and runc exec only returns once nothing holds them:
// a background child that keeps them open delays the result, up to the timeout. On timeout the exec'd
// process is SIGKILLed, and runc too if it still waits shortly after.
import { readFile, rm } from 'node:fs/promises';
import type { Logger } from '../../core/log.js';
import { InvalidArgument } from '../../core/errors.js';
import { CappedBuffer } from '../../core/capped-buffer.js';
import { shellStatus, spawn } from '../../core/spawn.js';
import { settledWithin } from '../../core/time.js';

export const DEFAULT_MAX_OUTPUT_BYTES = 16 * 1024 * 1024;
// How long to keep reading output after runc has exited (children of the exec'd process may hold the pipes).
const DRAIN_GRACE_MS = 200;
// After killing the exec'd process on timeout, how long runc gets to notice before it is killed too.
const RUNC_KILL_GRACE_MS = 2000;

export interface ExecSyncResult {
  stdout: Buffer;
  stderr: Buffer;
  exitCode: number;
  timedOut: boolean;
  /** True when output past maxOutputBytes was discarded from that stream. */
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
}

export interface RuncExecRequest {
  runtimePath: string;
  /** Global runc flags (--root=…). */
  runtimeArgs: string[];
  id: string;
  cmd: string[];
  /** Where runc writes the exec'd process's host pid; removed afterwards. */
  pidFile: string;
  /** 0 = no timeout. */
  timeoutSec: number;
  maxOutputBytes?: number;
  log: Logger;
}

export async function runcExecSync(r: RuncExecRequest): Promise<ExecSyncResult> {
  if (r.cmd.length === 0) throw new InvalidArgument(`exec in container "${r.id}": the command is empty`);
  if (!(r.timeoutSec >= 0)) throw new InvalidArgument(`exec in container "${r.id}": timeout ${r.timeoutSec} must be >= 0 seconds`);
  const out = new CappedBuffer(r.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES);
  const err = new CappedBuffer(r.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES);
  const started = Date.now();

  const sub = spawn(r.runtimePath, [...r.runtimeArgs, 'exec', '--pid-file', r.pidFile, r.id, ...r.cmd]);
  // Outcome comes from the exit below; the pipes may stay open longer, held by leftovers.
  const settled = new Promise((resolve) => sub.once('close', resolve));
  sub.stdout!.on('data', (b: Buffer) => out.push(b));
  sub.stderr!.on('data', (b: Buffer) => err.push(b));

  let timedOut = false;
  let runcKillTimer: NodeJS.Timeout | undefined;
  const timer = r.timeoutSec > 0 ? setTimeout(() => {
    timedOut = true;
    void killExecProcess(r.pidFile, r.log);
    runcKillTimer = setTimeout(() => sub.kill('SIGKILL'), RUNC_KILL_GRACE_MS);
  }, r.timeoutSec * 1000) : undefined;

  try {
    const exit = await sub.exited;
    clearTimeout(timer);
    clearTimeout(runcKillTimer);
    await settledWithin(settled, DRAIN_GRACE_MS);
    // Whatever still holds the pipes (a background child of the command) does not hold us up.
    sub.stdout!.destroy();
    sub.stderr!.destroy();
    const exitCode = shellStatus(exit);
    r.log.debug({ id: r.id, exitCode, timedOut, ms: Date.now() - started }, 'exec sync finished');
    return {
      stdout: out.toBuffer(),
      stderr: err.toBuffer(),
      exitCode,
      timedOut,
      stdoutTruncated: out.truncated,
      stderrTruncated: err.truncated,
    };
  } finally {
    clearTimeout(timer);
    clearTimeout(runcKillTimer);
    await rm(r.pidFile, { force: true });
  }
}

async function killExecProcess(pidFile: string, log: Logger): Promise<void> {
  try {
    const pid = Number.parseInt(await readFile(pidFile, 'utf8'), 10);
    if (pid > 1) process.kill(pid, 'SIGKILL');
  } catch (e) {
    // No pid file yet (runc still starting it) or already gone: the runc kill that follows covers it.
    log.debug({ err: e, pidFile }, 'exec timeout: could not kill the exec process directly');
  }
}

