// Runs the real daemon as a child process on a temporary socket and temporary directories.
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { CriClient } from './cri-client.js';

export const MAIN = fileURLToPath(new URL('../../server/main.js', import.meta.url));

export interface DaemonDirs {
  base: string;
  socket: string;
  rootDir: string;
  stateDir: string;
  configPath: string;
  /** runc's --root for the default handler. */
  runcRoot: string;
  /** Where the daemon pins network namespaces when it was given a directory of its own. */
  netnsDir?: string;
}

/** Where the test daemon's CNI configuration lives (see cni-env.ts for a ready network). */
export interface DaemonNetwork {
  confDir: string;
  cacheDir: string;
  binDirs: string[];
  /** NetworkAttachmentDefinitions for secondary networks (default: an empty dir of the daemon's own). */
  networksDir?: string;
  /** kubelet's pod-resources socket (default: one that does not exist). */
  podResourcesSocket?: string;
}

/**
 * Fresh directories and a config file for a test daemon; `extraToml` is appended to the config.
 * Without `net` the daemon gets an empty conf dir of its own; it never writes a default network.
 * With `ownNetnsDir` it pins namespaces below its own directory, out of the host's /var/run/netns.
 */
export function makeDaemonDirs(extraToml = '', net?: DaemonNetwork, opts: { ownNetnsDir?: boolean } = {}): DaemonDirs {
  const base = mkdtempSync(join(tmpdir(), 'minicri-test-'));
  // Searchable (not listable) by others, as /run is: user-namespaced pods' roots are staged beside
  // state_dir and a pod's root must pass through here (the daemon keeps root_dir and state_dir 0700).
  chmodSync(base, 0o711);
  const dirs: DaemonDirs = {
    base,
    socket: join(base, 'run', 'minicri.sock'),
    rootDir: join(base, 'root'),
    stateDir: join(base, 'run'),
    configPath: join(base, 'minicri.toml'),
    runcRoot: join(base, 'run', 'runc', 'runc'),
    ...(opts.ownNetnsDir ? { netnsDir: join(base, 'netns') } : {}),
  };
  writeFileSync(dirs.configPath, [
    `socket = "${dirs.socket}"`,
    ...(dirs.netnsDir ? [`netns_dir = "${dirs.netnsDir}"`] : []),
    `root_dir = "${dirs.rootDir}"`,
    `state_dir = "${dirs.stateDir}"`,
    // Debug unless the test chose a level (long runs would otherwise log megabytes).
    ...(/^log_level\s*=/m.test(extraToml) ? [] : ['log_level = "debug"']),
    // No warm-up unless the test asks: it would add a pull's CPU, and 40 MiB kept, to every daemon a test starts.
    ...(/^warm_up_pulls\s*=/m.test(extraToml) ? [] : ['warm_up_pulls = false']),
    extraToml,
    '[cni]',
    `conf_dir = "${net?.confDir ?? join(base, 'net.d')}"`,
    `cache_dir = "${net?.cacheDir ?? join(base, 'cni-cache')}"`,
    `bin_dirs = ${JSON.stringify(net?.binDirs ?? ['/usr/lib/cni'])}`,
    'write_default_network = false',
    `networks_dir = "${net?.networksDir ?? join(base, 'networks.d')}"`,
    `pod_resources_socket = "${net?.podResourcesSocket ?? join(base, 'no-kubelet.sock')}"`,
  ].join('\n'));
  return dirs;
}

export class TestDaemon {
  readonly client: CriClient;
  private output = '';
  readonly exited: Promise<number | null>;

  private constructor(readonly dirs: DaemonDirs, readonly process: ChildProcess) {
    this.client = new CriClient(dirs.socket);
    // The last megabyte is plenty to explain a failure.
    const keep = (chunk: Buffer) => { this.output = (this.output + chunk.toString()).slice(-1024 * 1024); };
    process.stderr?.on('data', keep);
    process.stdout?.on('data', keep);
    this.exited = new Promise((resolve) => process.once('exit', (code, signal) => resolve(code ?? (signal ? -1 : null))));
  }

  /**
   * Starts the daemon and waits until it answers Version and has swept what no record explains (which it
   * does once serving), so a test sees the host as a whole recovery leaves it.
   */
  static async start(dirs: DaemonDirs = makeDaemonDirs(), env: Record<string, string> = {}): Promise<TestDaemon> {
    // Run as the command itself, so its shebang's node flags apply as they do in production.
    const child = spawn(MAIN, ['serve', '--config', dirs.configPath], {
      // Frozen records: a change to one made anywhere but in its table's update throws (see store/store.ts).
      env: { ...process.env, MINICRI_TEST_FROZEN_RECORDS: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const daemon = new TestDaemon(dirs, child);
    const deadline = Date.now() + 20_000;
    for (;;) {
      const exited = await Promise.race([daemon.exited.then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 50))]);
      if (exited) throw new Error(`daemon exited during start:\n${daemon.log()}`);
      try {
        await daemon.client.runtime.call('Version', {}, { timeoutMs: 1000 });
        while (!daemon.log().includes('sweep of unexplained host objects done')) {
          // It answers Version before the rest of its start, which may still fail: the loop's check above says so.
          if (daemon.process.exitCode !== null || daemon.process.signalCode !== null) break;
          if (Date.now() > deadline) throw new Error('the sweep of unexplained host objects did not finish');
          await new Promise((r) => setTimeout(r, 20));
        }
        if (daemon.log().includes('sweep of unexplained host objects done')) return daemon;
      } catch {
        if (Date.now() > deadline) {
          child.kill('SIGKILL');
          throw new Error(`daemon did not answer within 20 s:\n${daemon.log()}`);
        }
      }
    }
  }

  /** Everything the daemon printed so far. */
  log(): string {
    return this.output;
  }

  /** Sends a signal and waits for the exit code. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    this.client.close();
    if (this.process.exitCode === null && this.process.signalCode === null) this.process.kill(signal);
    return this.exited;
  }
}

/** Runs the minicri command to completion: exit code and output. */
export function runMinicri(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(MAIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => { stdout += c.toString(); });
    child.stderr.on('data', (c: Buffer) => { stderr += c.toString(); });
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Unmounts everything mounted at or below `dir`, deepest first (what a killed daemon may leave). */
export async function unmountUnder(dir: string): Promise<void> {
  const mounts = (await readFile('/proc/self/mounts', 'utf8')).split('\n').map((l) => l.split(' ')[1] ?? '')
    .map((m) => m.replace(/\\040/g, ' ')).filter((m) => m === dir || m.startsWith(`${dir}/`));
  for (const m of mounts.sort((a, b) => b.length - a.length)) await execa('umount', ['-l', m], { reject: false });
}

export function removeDirs(dirs: DaemonDirs): void {
  rmSync(dirs.base, { recursive: true, force: true });
}
