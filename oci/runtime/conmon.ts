// Launching conmon, the per-container monitor CRI-O uses: it runs `runc create`, then stays as the
// container's parent to copy stdout/stderr into the CRI log file, write the exit code to
// <exit-dir>/<id>, note OOM kills in <persist-dir>/oom and serve the `ctl` fifo (log reopen, resize).
//
// conmon forks itself into the background; we only talk to it through the sync pipe (fd 3, named by
// _OCI_SYNCPIPE), where API version 1 writes one JSON line once runc create is done:
//   {"data": <container pid>}   or   {"data": -1, "message": "<runc's error output>"}
import type { Logger } from '../../core/log.js';
import { DeadlineExceeded, Internal } from '../../core/errors.js';
import { spawn, type Subprocess } from '../../core/spawn.js';
import { liveProcesses } from './processes.js';
import { runcErrorText } from './runc-errors.js';

export interface ConmonLaunch {
  id: string;
  bundle: string;
  runtimePath: string;
  /** Global runc flags (e.g. --root=…), passed before runc's subcommand. */
  runtimeArgs: string[];
  logPath: string;
  exitDir: string;
  persistDir: string;
  socketDir: string;
  containerPidFile: string;
  conmonPidFile: string;
  logLevel: 'debug' | 'info' | 'warn' | 'error';
  stdin?: boolean;
  stdinOnce?: boolean;
  tty?: boolean;
  systemdCgroup?: boolean;
  /** Set for a restore: conmon runs `runc restore` (work dir: the bundle) instead of `runc create`. */
  restore?: RestoreLaunch;
}

export interface RestoreLaunch {
  /** CRIU's images. */
  imagePath: string;
  /** `TYPE:NAME` (apparmor:NAME): the LSM profile CRIU gives the restored processes instead of the dumped one. */
  lsmProfile?: string;
  /** The images hold established TCP connections (a dump with `--tcp-established`): CRIU restores them. */
  tcpEstablished?: boolean;
}

/** conmon's command line for one container. Pure. */
export function buildConmonArgs(c: ConmonLaunch): string[] {
  const args = [
    '--api-version', '1',
    '-c', c.id,
    '-u', c.id,
    '-r', c.runtimePath,
    '-b', c.bundle,
    '-p', c.containerPidFile,
    '-P', c.conmonPidFile,
    '-l', `k8s-file:${c.logPath}`,
    '--exit-dir', c.exitDir,
    '--persist-dir', c.persistDir,
    '--socket-dir-path', c.socketDir,
    '--log-level', c.logLevel,
  ];
  for (const a of c.runtimeArgs) args.push('--runtime-arg', a);
  if (c.systemdCgroup) args.push('-s');
  // --file-locks as the dump was taken (checkpoint.ts): a lock it saved must be restored too.
  if (c.restore) {
    args.push('--restore', c.restore.imagePath, '--runtime-opt', '--file-locks');
    if (c.restore.lsmProfile) args.push('--runtime-opt', `--lsm-profile=${c.restore.lsmProfile}`);
    if (c.restore.tcpEstablished) args.push('--runtime-opt', '--tcp-established');
  }
  if (c.stdin) {
    args.push('-i');
    // conmon closes the container's stdin when the first attach ends unless told otherwise.
    if (!c.stdinOnce) args.push('--leave-stdin-open');
  }
  if (c.tty) args.push('-t');
  return args;
}

export type SyncResult = { ok: true; pid: number } | { ok: false; message: string };

/** Interpret conmon's sync pipe line. Pure. */
export function parseSyncMessage(line: string): SyncResult {
  let msg: unknown;
  try {
    msg = JSON.parse(line);
  } catch (err) {
    throw new Internal(`conmon sent an unreadable sync message "${line.trim()}"`, { cause: err });
  }
  const { data, message } = (msg ?? {}) as { data?: unknown; message?: unknown };
  if (typeof data !== 'number' || !Number.isInteger(data)) {
    throw new Internal(`conmon sync message without an integer "data": "${line.trim()}"`);
  }
  if (data > 0) return { ok: true, pid: data };
  const text = typeof message === 'string' && message.trim() !== '' ? runcErrorText(message) : `runtime failed with status ${data}`;
  return { ok: false, message: text };
}

/**
 * Start conmon for a container and wait until runc create has finished. Resolves with the container's
 * pid; throws Internal with runc's error text on failure, DeadlineExceeded after timeoutMs.
 *
 * The sync pipe is an extra fd (3) whose other end lives on in conmon's daemon after the launched process
 * itself has exited.
 */
export function launchConmon(
  conmonPath: string, c: ConmonLaunch, opts: { log: Logger; timeoutMs: number; spawned?: () => void },
): Promise<number> {
  const args = buildConmonArgs(c);
  const started = Date.now();
  opts.log.debug({ id: c.id, args }, 'starting conmon');
  return new Promise<number>((resolve, reject) => {
    // detached: its own session, so signals to our process group never reach it. Every stdio end we
    // hold is closed below, so nothing ties conmon's daemon to us once it has reported.
    let child: Subprocess;
    try {
      child = spawn(conmonPath, args, {
        detached: true,
        // conmon also drops an "oom" file in its working directory: keep that inside the persist dir.
        cwd: c.persistDir,
        stdio: ['ignore', 'ignore', 'pipe', 'pipe'],
        env: { ...process.env, _OCI_SYNCPIPE: '3' },
      });
    } catch (err) {
      reject(new Internal(`cannot run conmon at ${conmonPath}: ${(err as Error).message}`, { cause: err }));
      return;
    }
    opts.spawned?.();
    const sync = child.stdio[3]!;
    const stderr: Buffer[] = [];
    let line = '';
    let settled = false;
    let exit: string | undefined;

    const finish = (err: Error | undefined, pid?: number) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sync.destroy();
      child.stderr!.destroy();
      child.unref();
      if (err) reject(err);
      else {
        opts.log.debug({ id: c.id, pid, ms: Date.now() - started }, 'conmon reported container created');
        resolve(pid!);
      }
    };
    const timer = setTimeout(() => {
      finish(new DeadlineExceeded(
        `container "${c.id}": conmon did not report runc create within ${opts.timeoutMs} ms; check runc and the bundle at ${c.bundle}`,
      ));
    }, opts.timeoutMs);

    child.stderr!.on('data', (b: Buffer) => { if (stderr.length < 64) stderr.push(b); });
    child.on('exit', (code: number | null, signal: NodeJS.Signals | null) => { exit = signal ?? String(code); });
    sync.on('data', (b: Buffer) => {
      line += b.toString('utf8');
      const nl = line.indexOf('\n');
      if (nl < 0) return;
      try {
        const r = parseSyncMessage(line.slice(0, nl));
        if (r.ok) finish(undefined, r.pid);
        else finish(new Internal(`container "${c.id}": runc ${c.restore ? 'restore' : 'create'} failed: ${r.message}`));
      } catch (err) {
        finish(err as Error);
      }
    });
    // EOF without a message: conmon died before or instead of running runc.
    sync.on('close', () => {
      const fail = () => {
        const why = Buffer.concat(stderr).toString('utf8').trim();
        finish(new Internal(`container "${c.id}": conmon exited (status ${exit}) without reporting runc create${why ? `: ${why}` : ''}`));
      };
      if (exit !== undefined) fail();
      else child.once('close', fail); // let its exit status and last stderr arrive first
    });
    sync.on('error', () => { /* surfaced by 'close' */ });
  });
}

/** Running conmon processes whose command line mentions `marker` (a daemon's state dir), with their container ids. */
export async function listConmons(marker: string): Promise<{ pid: number; id: string }[]> {
  return (await liveProcesses('conmon', marker)).flatMap(({ pid, argv }) => {
    const id = argv[argv.indexOf('-c') + 1];
    return id ? [{ pid, id }] : [];
  });
}
