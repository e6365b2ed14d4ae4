// The OCI runtime driver: containers run by runc under conmon, as CRI-O does.
//
// Layout under stateDir (all ours, one entry per container id):
//   exits/<id>             conmon's exit file: the exit code; its mtime is the finish time
//   containers/<id>/       conmon's persist dir: conmon.pid, pid, meta.json, plus conmon's own
//                          "exit" and "oom" (present when the container was OOM killed)
//   sockets/<id>           conmon's link to the bundle, for the attach socket
// runc keeps its own state under `root`. Nothing here is held in memory, so a restarted daemon
// picks up where it left off (list() + state() + exitStatus()).
import { mkdir, readFile, rm, stat, writeFile, open, readlink } from 'node:fs/promises';
import { constants as fsConstants } from 'node:fs';
import { dirname, join } from 'node:path';
import { constants as osConstants } from 'node:os';
import type { Logger } from '../../core/log.js';
import { AlreadyExists, FailedPrecondition, Internal, InvalidArgument, NotFound, DeadlineExceeded } from '../../core/errors.js';
import { launchConmon, type RestoreLaunch } from './conmon.js';
import { runcExecSync, type ExecSyncResult } from './exec.js';
import { ExitWatcher } from './exit-watch.js';
import { cgroupDir, cgroupEmpty, cgroupHierarchies, removeCgroupDir } from './cgroups.js';
import { readRuncState } from './runc-state.js';
import { releaseCreatedInit } from './exec-fifo.js';
import { runcErrorText, isNotExist, isNotRunning } from './runc-errors.js';
import { criuErrors, runcDump, stopCutOffDumps, type CheckpointRequest } from './checkpoint.js';
import { restoredPrivilegesBeyondSpec } from './checkpoint-privileges.js';
import { exists } from '../../core/fs.js';
import { sleep } from '../../core/time.js';
import { run } from '../../core/spawn.js';
import { readBundleSpec } from './bundle.js';

export interface OciRuntimeOptions {
  runtimePath: string;
  conmonPath: string;
  /** runc --root, e.g. /run/minicri/runc */
  root: string;
  /** Exit files, conmon sockets, pid files. */
  stateDir: string;
  log: Logger;
  cgroupManager?: 'cgroupfs' | 'systemd';
  /** How long runc create may take under conmon; default 60 s. */
  createTimeoutMs?: number;
  /** The CRIU runc checkpoints and restores with (`runc --criu`); runc's own default ("criu" in PATH) when unset. */
  criuPath?: string;
}

export interface CreateRequest {
  id: string;
  /** Contains config.json and the rootfs. */
  bundle: string;
  logPath: string;
  stdin?: boolean;
  stdinOnce?: boolean;
  tty?: boolean;
  /**
   * Called once conmon is started, when the daemon's fork for it is done. Every fork stalls the daemon for a
   * time that grows with its memory (several ms): a caller with forks of its own to make (CNI plugins) can
   * wait for this rather than delay the container's creation.
   */
  launched?: () => void;
}

export interface ContainerState {
  /** runc's status: creating | created | running | paused | stopped */
  status: string;
  /** 0 once stopped. */
  pid: number;
  bundle: string;
}

export interface ExitStatus {
  exitCode: number;
  finishedAt: Date;
  oomKilled: boolean;
}

interface Meta {
  bundle: string;
  logPath: string;
}

// Container ids become file names and runc ids: keep them to a safe alphabet.
const ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
// After SIGKILL a process dies at once; this only bounds waiting for conmon to write the exit file.
const KILL_WAIT_MS = 10_000;

export class OciRuntime {
  private readonly log: Logger;
  private readonly globalArgs: string[];
  private readonly exitDir: string;
  private readonly containersDir: string;
  private readonly socketDir: string;
  /** Which containers have exit files; started by watchExits(). */
  readonly exits: ExitWatcher;
  /**
   * The cgroup hierarchies, read once: they are mounted at boot, while the mount table they are read from
   * grows by a few lines per pod (hundreds of KB at 250 pods, read and parsed per removed container otherwise).
   */
  private hierarchies: Promise<string[]> | undefined;

  constructor(private readonly opts: OciRuntimeOptions) {
    this.log = opts.log;
    this.globalArgs = [`--root=${opts.root}`, ...(opts.cgroupManager === 'systemd' ? ['--systemd-cgroup'] : []),
      ...(opts.criuPath ? [`--criu=${opts.criuPath}`] : [])];
    this.exitDir = join(opts.stateDir, 'exits');
    this.containersDir = join(opts.stateDir, 'containers');
    this.socketDir = join(opts.stateDir, 'sockets');
    this.exits = new ExitWatcher(this.exitDir);
  }

  /** The runtime binary and the global flags every call of it needs. */
  commandLine(): { path: string; args: string[] } {
    return { path: this.opts.runtimePath, args: [...this.globalArgs] };
  }

  /** Follows the exit directory so exits.mayHaveExited() answers without touching the disk. */
  watchExits(): void {
    this.exits.start();
  }

  close(): void {
    this.exits.stop();
  }

  /** runc create under a new conmon; the container waits in CREATED until start(). */
  create(c: CreateRequest): Promise<{ pid: number }> {
    return this.launch(c);
  }

  /**
   * `runc restore` of CRIU's images at `imagePath` under a new conmon, which holds the restored process's stdio
   * and log as it would a created one's: the container runs again from where it was dumped. CRIU refusing is
   * FAILED_PRECONDITION with its own error lines (from restore.log in the bundle, its work dir). CRIU gives the
   * processes the credentials of its images, not the spec's: the spec's AppArmor profile is passed to it, and
   * processes that come back holding more than the spec grants are killed, FAILED_PRECONDITION.
   */
  async restore(c: CreateRequest & { imagePath: string; tcpEstablished?: boolean }): Promise<{ pid: number }> {
    const spec = (await readBundleSpec(c.bundle).catch(() => undefined))?.spec; // launch() says what is wrong with a bundle
    const profile = spec?.process?.apparmorProfile;
    let pid: number;
    try {
      ({ pid } = await this.launch(c, {
        imagePath: c.imagePath, tcpEstablished: c.tcpEstablished, ...(profile ? { lsmProfile: `apparmor:${profile}` } : {}),
      }));
    } catch (err) {
      if (!(err instanceof Internal)) throw err;
      const cause = criuErrors(await readFile(join(c.bundle, 'restore.log'), 'utf8').catch(() => ''));
      const criu = cause.length > 0 ? `; CRIU: ${cause.join('; ')}` : '';
      throw new FailedPrecondition(`restore of container "${c.id}" failed: ${err.message}${criu}`
        + ' (`criu check` tells whether CRIU works on this node; '
        + 'a restore needs the kernel and CPU features of the dump\'s)', { cause: err });
    }
    const beyond = await restoredPrivilegesBeyondSpec(pid, spec ?? (await readBundleSpec(c.bundle)).spec);
    if (beyond.length > 0) {
      await this.cleanupFailedCreate(c.id);
      throw new FailedPrecondition(`restore of container "${c.id}" refused, its processes killed: CRIU restored them with the privileges `
        + `they were checkpointed with, more than this container's request grants (${beyond.slice(0, 4).join('; ')}); `
        + 'restore it into a container whose security context grants what the checkpointed one had');
    }
    return { pid };
  }

  private async launch(c: CreateRequest, restore?: RestoreLaunch): Promise<{ pid: number }> {
    checkId(c.id);
    if (!c.bundle.startsWith('/') || !c.logPath.startsWith('/')) {
      throw new InvalidArgument(`container "${c.id}": bundle "${c.bundle}" and log path "${c.logPath}" must be absolute paths`);
    }
    if (!(await exists(join(c.bundle, 'config.json')))) {
      throw new InvalidArgument(`container "${c.id}": bundle ${c.bundle} has no config.json: write the OCI spec first`);
    }
    if (!(await exists(dirname(c.logPath)))) {
      throw new InvalidArgument(`container "${c.id}": log directory ${dirname(c.logPath)} does not exist: create it first`);
    }
    if (await this.state(c.id)) throw new AlreadyExists(`container "${c.id}" already exists in runc: delete it first`);
    const dir = this.containerDir(c.id);
    await Promise.all([mkdir(this.exitDir, { recursive: true }), mkdir(this.socketDir, { recursive: true })]);
    await rm(dir, { recursive: true, force: true }); // leftovers of an earlier container with this id
    await rm(join(this.exitDir, c.id), { force: true });
    await mkdir(dir, { recursive: true });
    try {
      const meta: Meta = { bundle: c.bundle, logPath: c.logPath };
      await writeFile(join(dir, 'meta.json'), JSON.stringify(meta));
      const pid = await launchConmon(this.opts.conmonPath, {
        id: c.id,
        bundle: c.bundle,
        runtimePath: this.opts.runtimePath,
        runtimeArgs: this.globalArgs,
        logPath: c.logPath,
        exitDir: this.exitDir,
        persistDir: dir,
        socketDir: this.socketDir,
        containerPidFile: join(dir, 'pid'),
        conmonPidFile: join(dir, 'conmon.pid'),
        logLevel: conmonLogLevel(this.log.level),
        stdin: c.stdin,
        stdinOnce: c.stdinOnce,
        tty: c.tty,
        systemdCgroup: this.opts.cgroupManager === 'systemd',
        ...(restore ? { restore } : {}),
      }, { log: this.log, timeoutMs: this.opts.createTimeoutMs ?? 60_000, ...(c.launched ? { spawned: c.launched } : {}) });
      return { pid };
    } catch (err) {
      await this.cleanupFailedCreate(c.id);
      throw err;
    }
  }

  /**
   * What `runc start` does, done in the daemon (exec-fifo.ts). runc itself starts a container that is not
   * created (its errors are the ones to give) and one whose spec has poststart hooks (a CDI spec may add them),
   * so that they run wherever the runc in use runs them.
   */
  async start(id: string): Promise<void> {
    checkId(id);
    const st = await this.state(id);
    const spec = st?.status === 'created' ? (await readBundleSpec(st.bundle).catch(() => undefined))?.spec : undefined;
    if (!spec || (spec.hooks?.poststart?.length ?? 0) > 0) {
      await this.runc(['start', id], `start container "${id}"`);
      return;
    }
    await releaseCreatedInit(this.opts.root, id, async () => (await this.state(id))?.status);
  }

  /** runc's view of the container, or undefined when runc does not know it. */
  async state(id: string): Promise<ContainerState | undefined> {
    checkId(id);
    // Read from runc's state directory: a `runc state` process per call was the costliest part of a relist
    // or a stop.
    return readRuncState(this.opts.root, id);
  }

  /**
   * Send a signal (name like "SIGTERM"/"TERM" or number) to the container's init process. Done here by the
   * rule `runc kill` applies (only while the process runc started lives, same start time), which spares
   * the stop of every container and pod a runc process.
   */
  async kill(id: string, signal: string | number): Promise<void> {
    checkId(id);
    const number = signalNumber(signal);
    const st = await this.state(id);
    if (!st) throw new NotFound(`cannot signal container "${id}": it does not exist`);
    if (st.status === 'stopped') throw new FailedPrecondition(`cannot signal container "${id}": it is not running`);
    try {
      process.kill(st.pid, number);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ESRCH') {
        throw new FailedPrecondition(`cannot signal container "${id}": it is not running`);
      }
      throw new Internal(`cannot signal container "${id}" (pid ${st.pid}): ${(err as Error).message}`, { cause: err });
    }
  }

  /**
   * Stop: send `signal` (the image's StopSignal, else SIGTERM), wait up to timeoutSec for the exit
   * file, then SIGKILL. Returns at once for a container that has already exited.
   */
  async stop(id: string, o: { timeoutSec: number; signal?: string | number }): Promise<void> {
    checkId(id);
    if (await this.exitStatus(id)) return;
    const st = await this.state(id);
    if (!st) throw new NotFound(`container "${id}" does not exist`);
    if (st.status === 'stopped') return;
    // A created container never ran its process: there is nothing to shut down gracefully.
    if (o.timeoutSec > 0 && st.status !== 'created') {
      if (await this.signalIfRunning(id, normalizeSignal(o.signal ?? 'SIGTERM'))) {
        if (await this.waitForExit(id, o.timeoutSec * 1000)) return;
        this.log.info({ id, timeoutSec: o.timeoutSec }, 'container ignored its stop signal; killing it');
      }
    }
    await this.signalIfRunning(id, 'KILL');
    if (!(await this.waitForExit(id, KILL_WAIT_MS))) {
      throw new DeadlineExceeded(`container "${id}" did not exit within ${KILL_WAIT_MS} ms of SIGKILL; `
        + 'check its process (D state?) and conmon');
    }
  }

  /**
   * runc delete; idempotent. When runc no longer knows the container (a reboot or a crash emptied its state),
   * its cgroups may still be there: with the `bundle` it was made from, they are found and removed too.
   */
  async delete(id: string, o: { force?: boolean; bundle?: string } = {}): Promise<void> {
    checkId(id);
    const st = await this.state(id);
    if (!st) {
      // What an interrupted delete leaves (its state file gone, not yet its directory): runc no longer sees it.
      await rm(join(this.opts.root, id), { recursive: true, force: true });
      if (o.bundle) await removeBundleCgroups(o.bundle);
    }
    if (st && !o.force && st.status !== 'stopped' && st.status !== 'created') {
      throw new FailedPrecondition(`container "${id}" is ${st.status}: stop it before deleting, or delete with force`);
    }
    if (st && !(st.status === 'stopped' && o.bundle && await this.deleteStopped(id, o.bundle))) {
      const force = o.force || st.status === 'created' ? ['--force'] : [];
      const r = await run(this.opts.runtimePath, [...this.globalArgs, 'delete', ...force, id]);
      if (r.code !== 0 && !isNotExist(runcErrorText(r.stderr))) {
        throw new Internal(`runc delete of container "${id}" failed: ${runcErrorText(r.stderr)}`);
      }
    }
    // conmon writes the exit file as it goes; let it finish so nothing reappears after cleanup.
    await this.waitForConmon(id, KILL_WAIT_MS);
    await this.removeState(id);
  }

  /**
   * What `runc delete` does to a stopped container, done here when nothing in it needs runc: no process left in
   * its cgroups (runc would kill a straggler of a shared PID namespace) and no poststop hook to run. Its cgroups
   * and runc's state go, sparing a runc process, most of a RemoveContainer's time. False when runc must do it;
   * so always with the systemd driver, where runc stops the container's scope unit.
   */
  private async deleteStopped(id: string, bundle: string): Promise<boolean> {
    if (this.opts.cgroupManager === 'systemd') return false;
    const spec = (await readBundleSpec(bundle).catch(() => undefined))?.spec;
    const path = spec?.linux?.cgroupsPath;
    if (!path || (spec.hooks?.poststop?.length ?? 0) > 0) return false;
    const hierarchies = await this.cgroupHierarchies();
    const dirs = hierarchies.map((root) => join(root, cgroupDir(path)));
    // A hierarchy without the directory reads as empty: no look for it first.
    const empty = await Promise.all(dirs.map((dir) => cgroupEmpty(dir)));
    if (!empty.every(Boolean)) return false;
    await removeCgroupDir(cgroupDir(path), hierarchies);
    await rm(join(this.opts.root, id), { recursive: true, force: true });
    return true;
  }

  private cgroupHierarchies(): Promise<string[]> {
    this.hierarchies ??= cgroupHierarchies().catch((err: unknown) => {
      this.hierarchies = undefined;
      throw err;
    });
    return this.hierarchies;
  }

  /** The container's exit, from conmon's exit file; undefined while it has not exited. */
  async exitStatus(id: string): Promise<ExitStatus | undefined> {
    checkId(id);
    const file = join(this.exitDir, id);
    let text: string;
    let finishedAt: Date;
    try {
      [text, finishedAt] = await Promise.all([readFile(file, 'utf8'), stat(file).then((s) => s.mtime)]);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
    const exitCode = parseExitFile(text);
    // conmon creates "oom" in its persist dir when the cgroup reported an OOM kill.
    const oomKilled = await exists(join(this.containerDir(id), 'oom'));
    return { exitCode, finishedAt, oomKilled };
  }

  /** Make conmon reopen the log file (after kubelet rotated it): message type 2 on its ctl fifo. */
  async reopenLog(id: string): Promise<void> {
    checkId(id);
    const meta = await this.meta(id);
    let fh;
    try {
      // Non-blocking: with no reader (conmon gone) this fails with ENXIO instead of hanging.
      fh = await open(join(meta.bundle, 'ctl'), fsConstants.O_WRONLY | fsConstants.O_NONBLOCK);
    } catch (err) {
      throw new FailedPrecondition(
        `container "${id}": cannot reach conmon to reopen its log (${(err as Error).message}); is the container running?`, { cause: err });
    }
    try {
      // "<type> <height> <width>": conmon wants all three numbers even for a reopen.
      await fh.write('2 0 0\n');
    } catch (err) {
      throw new FailedPrecondition(
        `container "${id}": conmon stopped listening while asked to reopen its log (${(err as Error).message})`, { cause: err });
    } finally {
      await fh.close();
    }
    const deadline = Date.now() + 5000;
    for (let wait = 5; !(await exists(meta.logPath)); wait = Math.min(wait * 2, 100)) {
      if (Date.now() > deadline) throw new Internal(`container "${id}": conmon did not reopen its log file ${meta.logPath}`);
      await sleep(wait);
    }
  }

  async execSync(id: string, cmd: string[], o: { timeoutSec: number; maxOutputBytes?: number }): Promise<ExecSyncResult> {
    checkId(id);
    const st = await this.state(id);
    if (!st) throw new NotFound(`container "${id}" does not exist`);
    if (st.status !== 'running') throw new FailedPrecondition(`container "${id}" is ${st.status}, not running: cannot exec in it`);
    const pidFile = join(this.containerDir(id), `exec-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}.pid`);
    return runcExecSync({
      runtimePath: this.opts.runtimePath,
      runtimeArgs: this.globalArgs,
      id,
      cmd,
      pidFile,
      timeoutSec: o.timeoutSec,
      maxOutputBytes: o.maxOutputBytes,
      log: this.log,
    });
  }

  /** Apply new resources (an OCI linux.resources object) with runc update. */
  async update(id: string, resources: object): Promise<void> {
    checkId(id);
    await this.runc(['update', '--resources', '-', id], `update resources of container "${id}"`, JSON.stringify(resources));
  }

  /**
   * A CRIU checkpoint of a running container that keeps running: paused (cgroup freezer) so that what
   * whileFrozen copies of its root filesystem matches the dumped memory, dumped, and resumed whatever failed.
   */
  async checkpoint(id: string, r: CheckpointRequest): Promise<void> {
    await this.pause(id);
    const resume = () => this.resume(id);
    try {
      await this.dump(id, r);
      await r.whileFrozen();
    } catch (err) {
      // The checkpoint's failure is the answer; a resume that fails too is logged beside it.
      await resume().catch((e: unknown) => this.log.error({ id, err: e }, 'container not resumed after its failed checkpoint'));
      throw err;
    }
    await resume();
  }

  /** Freezes a running container (`runc pause`: the cgroup freezer, v1 or v2) for a checkpoint; resume() thaws it. */
  async pause(id: string): Promise<void> {
    checkId(id);
    const st = await this.state(id);
    if (!st) throw new NotFound(`cannot checkpoint container "${id}": it does not exist`);
    // runc would pause (and CRIU dump) a created container too, whose process never ran.
    if (st.status !== 'running') throw new FailedPrecondition(`cannot checkpoint container "${id}": it is ${st.status}, not running`);
    await this.runc(['pause', id], `pause container "${id}" for its checkpoint`);
  }

  /** The CRIU dump of a container pause() froze; it stays frozen (CRIU leaves the freezer as it found it). */
  async dump(id: string, r: Omit<CheckpointRequest, 'whileFrozen'>): Promise<void> {
    checkId(id);
    await runcDump(this.commandLine(), id, r, this.log);
  }

  /** Ends a dump of `id` that a daemon's death left running, before its container is thawed (see stopCutOffDumps). */
  async stopCutOffDumps(id: string): Promise<void> {
    checkId(id);
    await stopCutOffDumps(this.commandLine(), id, this.log);
  }

  async resume(id: string): Promise<void> {
    checkId(id);
    await this.runc(['resume', id], `resume container "${id}"`);
  }

  /** Ids of every container runc knows (for recovery after a restart). */
  async list(): Promise<string[]> {
    const r = await run(this.opts.runtimePath, [...this.globalArgs, 'list', '--format', 'json']);
    if (r.code !== 0) throw new Internal(`runc list failed: ${runcErrorText(r.stderr)}`);
    const items = JSON.parse(r.stdout) as { id: string }[] | null;
    return (items ?? []).map((i) => i.id);
  }

  /** Path of conmon's attach socket for the container. */
  attachSocketPath(id: string): string {
    checkId(id);
    return join(this.socketDir, id, 'attach');
  }

  private containerDir(id: string): string {
    return join(this.containersDir, id);
  }

  private async meta(id: string): Promise<Meta> {
    try {
      return JSON.parse(await readFile(join(this.containerDir(id), 'meta.json'), 'utf8')) as Meta;
    } catch (err) {
      throw new NotFound(`container "${id}" is not known to the runtime (no state in ${this.containerDir(id)})`, { cause: err });
    }
  }

  private async runc(args: string[], what: string, input?: string): Promise<void> {
    const started = Date.now();
    const r = await run(this.opts.runtimePath, [...this.globalArgs, ...args], { input });
    this.log.debug({ args, ms: Date.now() - started }, 'runc');
    if (r.code === 0) return;
    const text = runcErrorText(r.stderr || r.stdout);
    if (isNotExist(text)) throw new NotFound(`cannot ${what}: it does not exist (runc: ${text})`);
    if (isNotRunning(text)) throw new FailedPrecondition(`cannot ${what}: it is not running (runc: ${text})`);
    throw new Internal(`cannot ${what}: runc: ${text}`);
  }

  /** Signal the container; false when it had already stopped. */
  private async signalIfRunning(id: string, signal: string): Promise<boolean> {
    try {
      await this.kill(id, signal);
      return true;
    } catch (err) {
      if (err instanceof FailedPrecondition) return false;
      throw err;
    }
  }

  /** Wait for conmon's exit file; true once present. Falls back to runc state when conmon is gone. */
  private async waitForExit(id: string, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    // With the exit watcher running, the exit file's appearance wakes us; polling is the fallback.
    if (this.exits.running && await this.exits.waitFor(id, timeoutMs)) return true;
    for (let wait = 5; ; wait = Math.min(wait * 2, 100)) {
      if (await exists(join(this.exitDir, id))) return true;
      if (Date.now() >= deadline) {
        // Without conmon nobody writes the exit file: accept runc's word that it stopped.
        return !(await this.conmonAlive(id)) && (await this.state(id))?.status !== 'running';
      }
      await sleep(wait);
    }
  }

  private async waitForConmon(id: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (let wait = 5; await this.conmonAlive(id); wait = Math.min(wait * 2, 100)) {
      if (Date.now() >= deadline) {
        this.log.warn({ id }, 'conmon still running after the container was deleted');
        return;
      }
      await sleep(wait);
    }
  }

  private async conmonAlive(id: string): Promise<boolean> {
    let pid: number;
    try {
      pid = Number.parseInt(await readFile(join(this.containerDir(id), 'conmon.pid'), 'utf8'), 10);
    } catch {
      return false;
    }
    return processAlive(pid, 'conmon');
  }

  private async cleanupFailedCreate(id: string): Promise<void> {
    try {
      await run(this.opts.runtimePath, [...this.globalArgs, 'delete', '--force', id]);
      await this.waitForConmon(id, KILL_WAIT_MS);
      await this.removeState(id);
    } catch (err) {
      this.log.warn({ id, err }, 'cleanup after a failed create was incomplete');
    }
  }

  private async removeState(id: string): Promise<void> {
    const link = join(this.socketDir, id);
    // Only remove what conmon made: a symlink (never follow it into the bundle).
    const isLink = await readlink(link).then(() => true, () => false);
    await Promise.all([
      rm(join(this.exitDir, id), { force: true }),
      rm(this.containerDir(id), { recursive: true, force: true }),
      isLink ? rm(link, { force: true }) : Promise.resolve(),
    ]);
  }
}

/** The exit code in a conmon exit file. Pure. */
export function parseExitFile(text: string): number {
  const t = text.trim();
  if (!/^-?\d+$/.test(t)) throw new Internal(`unreadable conmon exit file content "${t}"`);
  return Number.parseInt(t, 10);
}

/** Accepts "SIGTERM", "TERM", "15" or 15; returns what runc kill takes. Pure. */
export function normalizeSignal(signal: string | number): string {
  if (typeof signal === 'number') {
    if (!Number.isInteger(signal) || signal < 1 || signal > 64) throw new InvalidArgument(`invalid signal number ${signal}`);
    return String(signal);
  }
  const s = signal.trim().toUpperCase();
  if (/^\d+$/.test(s)) return normalizeSignal(Number(s));
  const name = s.startsWith('SIG') ? s : `SIG${s}`;
  if (!/^SIG[A-Z0-9+-]+$/.test(name)) throw new InvalidArgument(`invalid signal "${signal}"`);
  return name;
}

// glibc keeps the first two real-time signals for itself, so names count from 34, as runc's do.
const SIGRTMIN = 34;
const SIGRTMAX = 64;

/** The number of a signal given as normalizeSignal accepts it; InvalidArgument for a name Linux lacks. Pure. */
export function signalNumber(signal: string | number): number {
  const name = normalizeSignal(signal);
  if (/^\d+$/.test(name)) return Number(name);
  const known = (osConstants.signals as Record<string, number | undefined>)[name];
  if (known !== undefined) return known;
  const rt = /^SIGRT(MIN|MAX)(?:([+-])(\d+))?$/.exec(name);
  const n = rt && (rt[1] === 'MIN' ? SIGRTMIN : SIGRTMAX) + (rt[2] === '-' ? -1 : 1) * Number(rt[3] ?? 0);
  if (n && n >= SIGRTMIN && n <= SIGRTMAX) return n;
  throw new InvalidArgument(`invalid signal "${signal}": not a Linux signal`);
}

/** conmon's --log-level for a pino level. Pure. */
export function conmonLogLevel(level: string): 'debug' | 'info' | 'warn' | 'error' {
  if (level === 'trace' || level === 'debug') return 'debug';
  if (level === 'info') return 'info';
  if (level === 'warn') return 'warn';
  return 'error';
}

function checkId(id: string): void {
  if (!ID.test(id)) {
    throw new InvalidArgument(`invalid container id "${id}": use 1-128 letters, digits, '_', '.', '-', starting with a letter or digit`);
  }
}

/** A live (not zombie) process with the given command name. */
async function processAlive(pid: number, comm: string): Promise<boolean> {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    const statText = await readFile(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) state …": comm may contain spaces or parentheses, so split at the last ')'.
    const close = statText.lastIndexOf(')');
    const name = statText.slice(statText.indexOf('(') + 1, close);
    const state = statText.slice(close + 2, close + 3);
    return name === comm && state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/**
 * Removes the cgroups the spec in `bundle` names. A bundle without a whole spec (a crash while it was written)
 * was never given to runc, so it has none to remove.
 */
async function removeBundleCgroups(bundle: string): Promise<void> {
  const path = (await readBundleSpec(bundle).catch(() => undefined))?.spec.linux?.cgroupsPath;
  if (path) await removeCgroupDir(cgroupDir(path));
}
