// The dump of a checkpoint: `runc checkpoint` (runc drives CRIU) of a container the driver paused first
// (runc.ts: pause, dump, copy the rootfs changes, resume, as CRI-O does it).
//
// At the deadline runc is killed, as CRI-O's context does; CRIU, its child, is let finish or fail on its own
// (killing it mid-dump could leave its parasite code in the container's processes), and is waited for so
// that nothing writes into the work dir once the caller removes it.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../../core/log.js';
import { DeadlineExceeded, FailedPrecondition, NotFound, Unavailable } from '../../core/errors.js';
import { DUMP_LOG } from './checkpoint-layout.js';
import { faultPoint } from '../../core/faults.js';
import { liveProcesses, liveProcessesWhere, type LiveProcess } from './processes.js';
import { isNotExist, isNotRunning, runcErrorText } from './runc-errors.js';
import { sleep } from '../../core/time.js';
import { outputOf, spawn } from '../../core/spawn.js';

export interface CheckpointRequest {
  /** Where CRIU writes its images (runc makes the dir). */
  imagePath: string;
  /** Where CRIU writes dump.log and stats-dump. */
  workPath: string;
  /** Aborted at the deadline: runc is killed, the container resumed, DEADLINE_EXCEEDED. */
  signal: AbortSignal;
  /** Established TCP connections dumped too (`--tcp-established`); CRIU refuses a container holding one otherwise. */
  tcpEstablished?: boolean;
  /** Runs after the dump while the container is still frozen, so what it copies matches the images. */
  whileFrozen: () => Promise<void>;
}

/** The runc command line of the dump (after runc's global flags). Pure. */
export function checkpointArgs(id: string, r: Pick<CheckpointRequest, 'imagePath' | 'workPath' | 'tcpEstablished'>): string[] {
  // --file-locks as CRI-O passes it: a container holding a lock is dumped instead of refused.
  return ['checkpoint', '--leave-running', '--file-locks', ...(r.tcpEstablished ? ['--tcp-established'] : []),
    '--image-path', r.imagePath, '--work-path', r.workPath, id];
}

/**
 * CRIU's own error lines in its log (the cause runc's message leaves out), the first ones: what failed first is
 * the cause, and in a restore its other processes then fail in turn, in an order that varies from run to run. Pure.
 */
export function criuErrors(log: string, max = 5): string[] {
  return log.split('\n').filter((l) => /\bError \(/.test(l)).map((l) => l.replace(/^\(\s*[\d.]+\)\s*/, '').trim()).slice(0, max);
}

/**
 * Whether CRIU's errors say the freeze caught a process mid-exit: a frozen cgroup keeps it so, and CRIU cannot
 * seize it. Thawed and frozen again, the process is gone: such a dump is worth another try. Pure.
 */
export function isFreezeRace(criuErrorLines: readonly string[]): boolean {
  return criuErrorLines.some((l) => /zombie \d+ .*found while seizing/.test(l));
}

// How long a CRIU left running by a killed runc may take to notice and exit.
const CRIU_EXIT_WAIT_MS = 30_000;

export interface RuncCommand {
  path: string;
  args: string[];
}

/** The dump itself: `runc checkpoint --leave-running` of the (paused) container. */
export async function runcDump(
  runc: RuncCommand, id: string, r: Pick<CheckpointRequest, 'imagePath' | 'workPath' | 'signal' | 'tcpEstablished'>, log: Logger,
): Promise<void> {
  const started = Date.now();
  const late = () => new DeadlineExceeded(`checkpoint of container "${id}" did not finish in time: `
    + 'runc was stopped and the container resumed; give it a longer timeout');
  if (r.signal.aborted) throw late();
  const sub = spawn(runc.path, [...runc.args, ...checkpointArgs(id, r)]);
  const output = outputOf(sub);
  faultPoint('checkpoint-dump-running');
  let criu: number[] = [];
  const onAbort = () => {
    void liveProcesses('criu').then((found) => {
      criu = found.filter((p) => p.ppid === sub.pid).map((p) => p.pid);
      sub.kill('SIGKILL');
    });
  };
  r.signal.addEventListener('abort', onAbort, { once: true });
  const result = await output.finally(() => r.signal.removeEventListener('abort', onAbort));
  log.debug({ id, exitCode: result.code, ms: Date.now() - started }, 'runc checkpoint');
  if (r.signal.aborted) {
    await waitGone(criu, CRIU_EXIT_WAIT_MS, log);
    throw late();
  }
  if (result.code === 0) return;
  const text = runcErrorText(result.stderr || result.stdout);
  if (/criu.*(not found|no such file)|executable file not found/i.test(text)) {
    throw new FailedPrecondition(`cannot checkpoint container "${id}": CRIU is not installed (runc: ${text}); install the criu package`);
  }
  if (isNotExist(text)) throw new NotFound(`cannot checkpoint container "${id}": it does not exist (runc: ${text})`);
  if (isNotRunning(text)) throw new FailedPrecondition(`cannot checkpoint container "${id}": it is not running (runc: ${text})`);
  const criuLog = await readFile(join(r.workPath, DUMP_LOG), 'utf8').catch(() => '');
  const cause = criuErrors(criuLog);
  if (isFreezeRace(cause)) {
    throw new Unavailable(`checkpoint of container "${id}" failed: one of its processes was exiting when it was frozen, `
      + `which CRIU cannot dump (CRIU: ${cause.join('; ')}); the container was resumed: try again`);
  }
  // CRIU refuses what it cannot dump (a kernel it does not know, a resource it cannot save): the node or the
  // container is not fit for a checkpoint, which no retry changes.
  const fromCriu = cause.length > 0 ? `; CRIU: ${cause.join('; ')}` : '';
  throw new FailedPrecondition(`checkpoint of container "${id}" failed: runc: ${text}${fromCriu} `
    + '(`criu check` tells whether CRIU works on this node)');
}

/**
 * Whether `argv` is a `runc checkpoint` of container `id` run with this runtime's global flags (its --root
 * among them): whatever the binary, so a stand-in runc run by its interpreter counts too. Pure.
 */
export function isDumpOf(argv: readonly string[], runc: RuncCommand, id: string): boolean {
  const at = argv.indexOf('checkpoint');
  return at > 0 && argv.at(-1) === id && argv.slice(at - runc.args.length, at).join('\0') === runc.args.join('\0');
}

/**
 * Ends the dumps of container `id` that a daemon's death cut off (its unit's KillMode=process leaves them
 * running): each `runc checkpoint` is killed, as at a deadline, and the processes it ran (CRIU) are waited for.
 * A CRIU that found its container frozen freezes it again when it ends, so a thaw before that would not last.
 */
export async function stopCutOffDumps(runc: RuncCommand, id: string, log: Logger): Promise<void> {
  const dumps = await liveProcessesWhere((p) => isDumpOf(p.argv, runc, id));
  if (dumps.length === 0) return;
  const parents = new Set(dumps.map((p) => p.pid));
  const children = (await liveProcessesWhere((p) => parents.has(p.ppid))).map((p) => p.pid);
  for (const d of dumps) {
    try {
      process.kill(d.pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
  log.warn({ id, runc: [...parents], waitingFor: children },
    'a checkpoint cut off was still dumping: stopped its runc, waiting for its CRIU');
  await waitGone(children, CRIU_EXIT_WAIT_MS, log);
}

async function waitGone(pids: number[], timeoutMs: number, log: Logger): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const wanted = new Set(pids);
  for (let wait = 10; ; wait = Math.min(wait * 2, 200)) {
    const alive: LiveProcess[] = wanted.size === 0 ? [] : await liveProcessesWhere((p) => wanted.has(p.pid));
    if (alive.length === 0) return;
    if (Date.now() >= deadline) {
      log.warn({ pids: alive.map((p) => p.pid) }, 'CRIU still running after its runc checkpoint was stopped');
      return;
    }
    await sleep(wait);
  }
}
