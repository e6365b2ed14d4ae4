// The CRI endpoints under test, each started fresh by the bench with its own config, root, state and socket
// under the bench dir and the bench's CNI network, and stopped after: minicri (this checkout) on the reference's
// runc 1.3.6 and on Debian's runc 1.1.5, containerd 2.1.5 (the reference, bench/lib/reference.ts) and Debian's
// containerd 1.6. None of them finds `unpigz` on its PATH (daemonPath).
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, openSync, closeSync, readFileSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { CriClient } from '../../test/support/cri-client.js';
import { MAIN, unmountUnder } from '../../test/support/daemon.js';
import { CNI_BIN, DEBIAN_RUNC, removeRuncState, type BenchEnv } from './env.js';
import { liveProcesses } from '../../oci/runtime/processes.js';
import { pool } from '../../core/locks.js';

/**
 * minicri on the reference's runc; minicri on Debian's runc 1.1.5 (reported apart, in no goal ratio); containerd
 * 2.1.5, the reference every ratio is against; Debian's containerd 1.6.
 */
export const TARGET_NAMES = ['minicri', 'containerd', 'minicri-runc115', 'containerd16'] as const;
export type TargetName = (typeof TARGET_NAMES)[number];

export interface Target {
  name: TargetName;
  /** The runc it runs containers with. */
  runc: string;
  /** A client of the daemon running now (a new one after a restart). */
  readonly client: CriClient;
  /** The daemon's pid, for its memory and CPU. */
  readonly pid: number;
  /** The helper processes it starts (conmon per container and one mount helper for minicri, a shim per pod for containerd). */
  helpers(): Promise<number[]>;
  /** Removes every pod and container, stops the daemon and anything it left. */
  stop(): Promise<void>;
  /**
   * Kills the daemon with SIGKILL, whatever it is doing, and starts it again on the same state; resolves with
   * the milliseconds from the new process's start to its first answer.
   */
  killAndRestart(): Promise<number>;
  /** What the daemon logged of its last start (minicri: time since exec and each step's share), if it says. */
  lastStart(): Record<string, unknown> | undefined;
}

export interface StartOptions {
  /** Directory for a V8 CPU profile of the daemon (minicri only), written when it exits. */
  cpuProfDir?: string;
}

/** Starts the named target on the bench environment. */
export function startTarget(name: TargetName, env: BenchEnv, opts: StartOptions = {}): Promise<Target> {
  if (name === 'minicri') return startMinicri(env, name, env.reference.runc, opts);
  if (name === 'minicri-runc115') return startMinicri(env, name, DEBIAN_RUNC, opts);
  if (name === 'containerd') return startContainerd(env, name, containerd21Config, env.reference.containerd, env.reference.runc);
  return startContainerd(env, name, containerd16Config, 'containerd', DEBIAN_RUNC);
}

/** Waits for the daemon's first answer to Version; resolves with the milliseconds since `started`. */
async function waitServing(client: CriClient, child: ChildProcess, what: string, logFile: string, started = Date.now()): Promise<number> {
  const deadline = started + 30_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${what} exited during start: see ${logFile}`);
    try {
      await client.runtime.call('Version', {}, { timeoutMs: 1000 });
      return Date.now() - started;
    } catch {
      if (Date.now() > deadline) throw new Error(`${what} did not answer Version within 30 s: see ${logFile}`);
      // Fine-grained: the restart bench measures time to this first answer.
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}

/**
 * How soon the bench's client tries the socket again: with grpc's own backoff (a second at first) the time to
 * a daemon's first answer would measure the client's wait, not the daemon's start.
 */
const RECONNECT_MS = 10;

/** A daemon process under the bench, with a client; `killAndRestart` replaces both. */
class Daemon {
  child: ChildProcess;
  client: CriClient;
  /** Set by the target's stop: a restart under way then launches nothing (a SIGINT's cleanup runs beside it). */
  stopped = false;

  constructor(
    private readonly launch: () => ChildProcess, private readonly socket: string, readonly what: string, readonly logFile: string,
  ) {
    this.child = launch();
    this.client = new CriClient(socket, { reconnectMs: RECONNECT_MS });
  }

  waitServing(): Promise<number> {
    return waitServing(this.client, this.child, this.what, this.logFile);
  }

  async killAndRestart(): Promise<number> {
    if (this.stopped) throw new Error(`${this.what} was stopped`);
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.kill('SIGKILL');
    await exited;
    this.client.close();
    if (this.stopped) throw new Error(`${this.what} was stopped during its restart`);
    const started = Date.now();
    this.child = this.launch();
    this.client = new CriClient(this.socket, { reconnectMs: RECONNECT_MS });
    return waitServing(this.client, this.child, this.what, this.logFile, started);
  }

  /** minicri's "minicri serving" line carries startMs and the step timeline, "recovery done" its own; containerd logs neither. */
  lastStart(): Record<string, unknown> | undefined {
    const lines = readFileSync(this.logFile, 'utf8').split('\n').reverse();
    const last = (msg: string) => {
      const line = lines.find((l) => l.includes(`"msg":"${msg}"`));
      return line ? JSON.parse(line) as { startMs?: number; ms?: Record<string, number> } : undefined;
    };
    const serving = last('minicri serving');
    return serving && { startMs: serving.startMs, ms: serving.ms, recoveryMs: last('recovery done')?.ms };
  }
}

/** Stops and removes every pod sandbox and container the endpoint knows. */
export async function drain(client: CriClient, concurrency = 8): Promise<void> {
  const pods = (await client.runtime.call('ListPodSandbox', {})).items;
  await pool(pods, concurrency, async (p) => {
    await client.runtime.call('StopPodSandbox', { pod_sandbox_id: p.id });
    await client.runtime.call('RemovePodSandbox', { pod_sandbox_id: p.id });
  });
  for (const c of (await client.runtime.call('ListContainers', {})).containers) {
    await client.runtime.call('RemoveContainer', { container_id: c.id });
  }
}

/**
 * The environment assignments and node flags of a script's `#!/usr/bin/env -S [-u NAME ...] [NAME=VALUE ...] node ...`
 * line (the names it unsets are not among them). Pure.
 */
export function shebangNodeCommand(script: string): { env: Record<string, string>; nodeFlags: string[] } {
  const first = script.slice(0, script.indexOf('\n'));
  const words = first.replace(/^#!\S*\s+(-S\s+)?/, '').split(/\s+/).filter(Boolean);
  while (words[0] === '-u') words.splice(0, 2);
  const env: Record<string, string> = {};
  while (words.length > 0 && /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[0]!)) {
    const [name, ...value] = words.shift()!.split('=');
    env[name!] = value.join('=');
  }
  return words[0] === 'node' ? { env, nodeFlags: words.slice(1) } : { env: {}, nodeFlags: [] };
}

function spawnLogged(cmd: string, args: string[], logFile: string, env: NodeJS.ProcessEnv = process.env): ChildProcess {
  const fd = openSync(logFile, 'a');
  try {
    const child = spawn(cmd, args, { stdio: ['ignore', fd, fd], env });
    child.on('error', () => undefined); // surfaces as an exit during start
    return child;
  } finally {
    closeSync(fd);
  }
}

async function terminate(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  await exited;
  clearTimeout(timer);
}

async function pullAll(client: CriClient, refs: string[]): Promise<void> {
  for (const image of refs) await client.image.call('PullImage', { image: { image } }, { timeoutMs: 300_000 });
}

/** Kills the given processes (left by a daemon that died) and waits a moment for them to go. */
async function killAll(pids: number[]): Promise<void> {
  for (const pid of pids) {
    try { process.kill(pid, 'SIGKILL'); } catch { /* already gone */ }
  }
  if (pids.length) await new Promise((r) => setTimeout(r, 200));
}

async function startMinicri(env: BenchEnv, name: TargetName, runc: string, opts: StartOptions): Promise<Target> {
  const dir = join(env.base, name);
  await mkdir(dir, { recursive: true });
  const socket = join(dir, 'run', 'minicri.sock');
  const configPath = join(dir, 'minicri.toml');
  const runcRoot = join(dir, 'run', 'runtime', 'runc-root');
  await writeFile(configPath, [
    `socket = "${socket}"`,
    `root_dir = "${join(dir, 'root')}"`,
    `state_dir = "${join(dir, 'run')}"`,
    'log_level = "info"',
    'cgroup_driver = "cgroupfs"',
    `criu_path = "${env.criuPath}"`,
    `[runtimes.runc]`,
    `path = "${runc}"`,
    `root = "${runcRoot}"`,
    '[cni]',
    `conf_dir = "${env.confDir}"`,
    `cache_dir = "${join(dir, 'cni-cache')}"`,
    `bin_dirs = ["${CNI_BIN}"]`,
    'write_default_network = false',
    `networks_dir = "${env.networksDir}"`,
    `pod_resources_socket = "${env.podResources.socket}"`,
    '[cdi]',
    `spec_dirs = ["${env.cdiDir}"]`,
    // The checkpoint bench restores from here (bench/checkpoint.ts).
    '[restore]',
    'enabled = true',
    `archive_dir = "${env.checkpointDir}"`,
  ].join('\n'));
  const logFile = join(dir, 'minicri.log');
  // The command itself, so its shebang's environment and node flags apply. Node refuses --cpu-prof in
  // NODE_OPTIONS, so a profiled daemon is started by node with the shebang's environment and flags plus the profiler's.
  const serve = ['serve', '--config', configPath];
  const shebang = shebangNodeCommand(readFileSync(MAIN, 'utf8'));
  const daemon = new Daemon(() => (opts.cpuProfDir
    ? spawnLogged(process.execPath, [...shebang.nodeFlags, '--cpu-prof', `--cpu-prof-dir=${opts.cpuProfDir}`, MAIN, ...serve], logFile,
      { ...process.env, PATH: env.daemonPath.path, ...shebang.env })
    : spawnLogged(MAIN, serve, logFile, { ...process.env, PATH: env.daemonPath.path })), socket, name, logFile);
  // The conmons, and the daemon's one mount helper: memory minicri adds to the host either way.
  const helpers = async () => {
    const mounters = (await liveProcesses('minicri-mounter')).filter((p) => p.ppid === daemon.child.pid);
    return [...(await liveProcesses('conmon', `${dir}/`)), ...mounters].map((p) => p.pid);
  };
  return readyTarget(name, runc, daemon, helpers, stopper({ daemon, helpers, runc, runcRoot, dir }), () => pullAll(daemon.client, [env.busybox]));
}

/** Waits for the daemon, readies it, and hands it out as a Target; stops it if it cannot be readied. */
async function readyTarget(
  name: TargetName, runc: string, daemon: Daemon, helpers: () => Promise<number[]>, stop: () => Promise<void>, ready: () => Promise<void>,
): Promise<Target> {
  try {
    await daemon.waitServing();
    await ready();
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    name, runc, helpers, stop,
    get client() { return daemon.client; },
    get pid() { return daemon.child.pid!; },
    killAndRestart: () => daemon.killAndRestart(),
    lastStart: () => daemon.lastStart(),
  };
}

/**
 * What both containerd configs begin with: their own root, state and sockets, debug level info, and the
 * snapshotters (and plugins) that do not apply here turned off.
 */
function containerdHead(version: number, dir: string, socket: string, alsoDisabled: string[]): string {
  const disabled = ['btrfs', 'zfs', 'devmapper'].map((s) => `io.containerd.snapshotter.v1.${s}`).concat(alsoDisabled);
  return [
    `version = ${version}`, `root = "${join(dir, 'root')}"`, `state = "${join(dir, 'state')}"`,
    `disabled_plugins = [${disabled.map((p) => `"${p}"`).join(', ')}]`, '',
    '[grpc]', `  address = "${socket}"`, '[ttrpc]', `  address = "${socket}.ttrpc"`, '[debug]', '  level = "info"',
  ].join('\n');
}

/**
 * containerd 2.1's config (version 3), as the reference's README gives it, on the bench's network, runc root and
 * registry (a hosts.toml under certs.d for the local registry over HTTP). NRI is off: its socket is a fixed path
 * on the host, and no bench uses it.
 */
export function containerd21Config(env: BenchEnv, dir: string, socket: string): string {
  const head = containerdHead(3, dir, socket, ['io.containerd.snapshotter.v1.blockfile', 'io.containerd.snapshotter.v1.erofs', 'io.containerd.nri.v1.nri']);
  return `${head}
[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '${env.pause}'
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = '${join(dir, 'certs.d')}'
  [plugins.'io.containerd.cri.v1.runtime']
    # The bound set here lacks CAP_SYS_RESOURCE: the pause's default -998 would fail in runc; clamp to our own.
    restrict_oom_score_adj = true
    # Pods' netns pinned under its state dir, not /var/run/netns: what a stop that could not drain it leaves
    # (an interrupted restart bench) goes with the dir.
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = '${env.reference.runc}'
          Root = '${join(dir, 'runc')}'
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['${CNI_BIN}']
      conf_dir = '${env.confDir}'
      max_conf_num = 1
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'
`;
}

/** The hosts.toml that sends containerd 2's pulls from `host` over plain HTTP. */
function hostsToml(host: string): string {
  return `server = "http://${host}"

[host."http://${host}"]
  capabilities = ["pull", "resolve"]
`;
}

/** containerd 1.6's own config: CRI plugin on the bench network, runc v2 shims, the local registry over HTTP. */
export function containerd16Config(env: BenchEnv, dir: string, socket: string): string {
  const cri = 'plugins."io.containerd.grpc.v1.cri"';
  const registryHost = env.registry.host;
  return `${containerdHead(2, dir, socket, ['io.containerd.snapshotter.v1.aufs'])}
[plugins."io.containerd.internal.v1.opt"]
  path = "${join(dir, 'opt')}"
[${cri}]
  sandbox_image = "${env.pause}"
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # The bound set here lacks CAP_SYS_RESOURCE: the pause's default -998 would fail in runc; clamp to our own.
  restrict_oom_score_adj = true
  # As containerd 2.1's: its pods' netns go with its dir.
  netns_mounts_under_state_dir = true
[${cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[${cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[${cri}.containerd.runtimes.runc.options]
  BinaryName = "${DEBIAN_RUNC}"
  Root = "${join(dir, 'runc')}"
  SystemdCgroup = false
[${cri}.cni]
  bin_dir = "${CNI_BIN}"
  conf_dir = "${env.confDir}"
[${cri}.registry.mirrors."${registryHost}"]
  endpoint = ["http://${registryHost}"]
`;
}

/** What the bench runs besides minicri's own needs: the peer, the registry, and busybox for the test image. */
const BENCH_PACKAGES = ['containerd', 'docker-registry', 'busybox', 'runc', 'conmon', 'containernetworking-plugins', 'iproute2'];

/**
 * Installs the Debian packages the bench needs that are missing (as scripts/setup.sh does for its own).
 * containerd's service is never started: the bench runs its own containerd with its own config.
 */
export async function ensurePackages(log: (msg: string) => void): Promise<void> {
  const missing: string[] = [];
  for (const p of BENCH_PACKAGES) {
    const status = await execa('dpkg-query', ['-W', '-f=${Status}', p], { reject: false });
    if (!String(status.stdout).includes('install ok installed')) missing.push(p);
  }
  if (missing.length === 0) return;
  log(`installing ${missing.join(' ')}`);
  await execa('apt-get', ['update', '-qq']);
  await execa('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...missing], { env: { DEBIAN_FRONTEND: 'noninteractive' } });
  // Under systemd the package starts its own service; the machine did not have it before, so it goes again.
  if (missing.includes('containerd') && existsSync('/run/systemd/system')) {
    await execa('systemctl', ['disable', '--now', 'containerd'], { reject: false });
  }
}

/** Where containerd 1.6's shims put their sockets whatever the config says; removed after if the bench made it. */
const SHIM_SOCKET_DIR = '/run/containerd';

/** Stops a runtime under test: drains its pods, ends it and its helpers, removes what they left. */
function stopper(t: {
  daemon: Daemon; helpers: () => Promise<number[]>; runc: string; runcRoot: string; dir: string; after?: () => Promise<void>;
}): () => Promise<void> {
  let stopping: Promise<void> | undefined;
  // Once: a signal's cleanup may come while another stop of the same target is under way.
  return () => {
    stopping ??= stop();
    return stopping;
  };
  async function stop(): Promise<void> {
    t.daemon.stopped = true;
    try {
      if (t.daemon.child.exitCode === null) await drain(t.daemon.client);
    } finally {
      t.daemon.client.close();
      await terminate(t.daemon.child);
      await killAll(await t.helpers());
      await removeRuncState(t.runc, t.runcRoot);
      await unmountUnder(t.dir);
      await t.after?.();
    }
  }
}

/** Whether the shim socket dir was there before the first containerd started; how many containerds run now. */
const shimDir = { hadIt: false, users: 0 };

async function startContainerd(
  env: BenchEnv, name: TargetName, config: (env: BenchEnv, dir: string, socket: string) => string, binary: string, runc: string,
): Promise<Target> {
  const dir = join(env.base, name);
  await mkdir(dir, { recursive: true });
  const socket = join(dir, 'containerd.sock');
  const configPath = join(dir, 'config.toml');
  await writeFile(configPath, config(env, dir, socket));
  const hostDir = join(dir, 'certs.d', env.registry.host);
  await mkdir(hostDir, { recursive: true });
  await writeFile(join(hostDir, 'hosts.toml'), hostsToml(env.registry.host));
  if (shimDir.users++ === 0) shimDir.hadIt = existsSync(SHIM_SOCKET_DIR);
  const logFile = join(dir, 'containerd.log');
  // The reference's bin/ first: containerd finds its shim on its PATH.
  const path = binary === 'containerd' ? env.daemonPath.path : `${join(env.reference.dir, 'bin')}:${env.daemonPath.path}`;
  const daemon = new Daemon(() => spawnLogged(binary, ['--config', configPath], logFile, { ...process.env, PATH: path }), socket, name, logFile);
  const helpers = async () => (await liveProcesses('containerd-shim-runc-v2', socket)).map((p) => p.pid);
  const stop = stopper({
    daemon, helpers, runc, runcRoot: join(dir, 'runc', 'k8s.io'), dir,
    after: async () => { if (--shimDir.users === 0 && !shimDir.hadIt) await rm(SHIM_SOCKET_DIR, { recursive: true, force: true }); },
  });
  return readyTarget(name, runc, daemon, helpers, stop, () => pullAll(daemon.client, [env.pause, env.busybox]));
}
