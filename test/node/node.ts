// A kind-style node for the node test: a Debian 12 root filesystem made with debootstrap from Debian's own
// packages (minbase plus systemd), booted with `systemd-nspawn --boot` so systemd is its PID 1. It shares
// the host's network (package downloads reach Debian's mirrors and the npm registry as the host does), so
// the pods inside use a bridge and subnet nothing else uses. Everything it makes on the host goes when it
// is shut down: its processes with its PID namespace, its mounts with its mount namespace, and the cgroups
// below the one it was started in, the bridge and its work directory by hand.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { cgroupHierarchies } from '../../oci/runtime/cgroups.js';

/** Kept between runs where the machine keeps it: the debootstrapped rootfs, and apt's and npm's downloads. */
export const CACHE = '/var/cache/minicri-test';
const ROOTFS_CACHE = join(CACHE, 'debian12-node');
const ROOTFS_RECIPE = 'bookworm minbase systemd,systemd-sysv 1';
export const NODE_BRIDGE = 'mcri-node0';
export const NODE_SUBNET = '10.236.0.0/24';
const NODE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The Debian mirror the host's apt uses (deb822 sources or sources.list), so the node downloads from it too. */
export async function hostDebianMirror(): Promise<string> {
  const texts: string[] = [];
  for (const dir of ['/etc/apt/sources.list.d']) {
    for (const f of (await readdir(dir).catch(() => [])).filter((f) => f.endsWith('.sources') || f.endsWith('.list'))) {
      texts.push(await readFile(join(dir, f), 'utf8'));
    }
  }
  texts.unshift(await readFile('/etc/apt/sources.list', 'utf8').catch(() => ''));
  for (const text of texts) {
    // deb822: a stanza with Types: deb and a bookworm suite.
    for (const stanza of text.split(/\n\s*\n/)) {
      if (/^Types:.*\bdeb\b/m.test(stanza) && /^Suites:.*\bbookworm\b(?![-/])/m.test(stanza)) {
        const uri = /^URIs:\s*(\S+)/m.exec(stanza)?.[1];
        if (uri) return uri;
      }
    }
    const line = /^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+bookworm\s/m.exec(text);
    if (line) return line[1]!;
  }
  throw new Error('no Debian bookworm mirror in the host\'s apt sources: the node test downloads its packages from it');
}

/** The cached rootfs, made once with debootstrap (minbase plus systemd as init). */
export async function cachedRootfs(log: (line: string) => void): Promise<string> {
  if ((await readFile(join(ROOTFS_CACHE, '.minicri-recipe'), 'utf8').catch(() => '')) === ROOTFS_RECIPE) return ROOTFS_CACHE;
  const mirror = await hostDebianMirror();
  const building = `${ROOTFS_CACHE}.building`;
  await rm(building, { recursive: true, force: true });
  await mkdir(CACHE, { recursive: true });
  log(`debootstrap: Debian 12 minbase with systemd from ${mirror} into ${building}`);
  await execa('debootstrap', ['--variant=minbase', '--include=systemd,systemd-sysv', 'bookworm', building, mirror], { timeout: 900_000, all: true })
    .catch((err) => { throw new Error(`debootstrap failed: ${err.all?.slice(-3000) ?? err.message}`); });
  // What a stock node has and nspawn expects: an empty machine-id for systemd to fill, a hostname, no downloads kept.
  await writeFile(join(building, 'etc/machine-id'), '');
  await writeFile(join(building, 'etc/hostname'), 'minicri-node\n');
  await execa('sh', ['-c', `rm -rf ${building}/var/cache/apt/archives/*.deb ${building}/var/lib/apt/lists/*`]);
  await writeFile(join(building, '.minicri-recipe'), ROOTFS_RECIPE);
  await rm(ROOTFS_CACHE, { recursive: true, force: true });
  await rename(building, ROOTFS_CACHE);
  return ROOTFS_CACHE;
}

export interface NodeOptions {
  /** Files to write into the node's filesystem before it boots, by absolute path inside it. */
  files: Record<string, string>;
  /** The checkout to copy to /root/minicri: its tracked and untracked, not ignored, files. */
  checkout: string;
  log: (line: string) => void;
}

export class KindNode {
  private constructor(
    readonly dir: string,
    readonly root: string,
    private readonly nspawn: ChildProcess,
    private readonly cgroup: string,
    private readonly hierarchies: string[],
    readonly consoleLog: string,
    /** The host PID of the node's systemd. */
    readonly pid1: number,
  ) {}

  /** Copies the cached rootfs, puts the checkout and `files` in, boots it and waits for systemd to be up. */
  static async boot(opts: NodeOptions): Promise<KindNode> {
    await removeStaleNodes(opts.log);
    const template = await cachedRootfs(opts.log);
    const dir = await execa('mktemp', ['-d', `/var/tmp/minicri-node-${process.pid}-XXXXXX`]).then((r) => r.stdout);
    const root = join(dir, 'rootfs');
    await execa('cp', ['-a', '--reflink=auto', template, root]);
    // The checkout as a person would have it: what `git ls-files` names (with work not yet committed), no build.
    const listed = (await execa('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: opts.checkout })).stdout;
    const present = listed.split('\0').filter((f) => f !== '' && existsSync(join(opts.checkout, f)));
    await mkdir(join(root, 'root/minicri'), { recursive: true });
    await execa('sh', ['-c', 'tar --null -T - -cf - | tar -xf - -C "$1"', 'sh', join(root, 'root/minicri')], { cwd: opts.checkout, input: present.join('\0') });
    // The site's trust, as the host's admin set it up: local CAs (a TLS-inspecting egress proxy's, say) that the
    // registries' certificates chain to here. The node's ca-certificates adds them to its bundle when setup.sh installs it.
    const localCas = '/usr/local/share/ca-certificates';
    if (existsSync(localCas)) await execa('cp', ['-a', `${localCas}/.`, join(root, localCas)]);
    for (const [path, text] of Object.entries(opts.files)) {
      await mkdir(join(root, path, '..'), { recursive: true });
      await writeFile(join(root, path), text);
    }
    for (const d of ['apt-archives', 'npm']) await mkdir(join(CACHE, d, 'partial'), { recursive: true });

    // Its own cgroup in every hierarchy of the host: what the node and its pods make stays below it, and goes with it.
    const name = `minicri-node-${process.pid}`;
    const hierarchies = await cgroupHierarchies();
    for (const h of hierarchies) {
      await mkdir(join(h, name), { recursive: true });
      // A v1 cpuset cgroup takes no process before it has CPUs and memory nodes: the root's.
      for (const f of ['cpuset.cpus', 'cpuset.mems']) {
        if (existsSync(join(h, f))) await writeFile(join(h, name, f), await readFile(join(h, f), 'utf8'));
      }
    }
    const consoleLog = join(dir, 'console.log');
    const out = createWriteStream(consoleLog);
    const join_ = hierarchies.map((h) => `echo $$ > '${join(h, name, 'cgroup.procs')}'`).join(' && ');
    const nspawn = spawn('sh', ['-c', `${join_} && exec "$@"`, 'sh', 'systemd-nspawn', '--quiet', '--boot', `--directory=${root}`,
      '--machine=minicri-node', '--register=no', '--keep-unit', '--resolv-conf=copy-host', '--timezone=off', '--link-journal=no',
      `--bind=${join(CACHE, 'apt-archives')}:/var/cache/apt/archives`, `--bind=${join(CACHE, 'npm')}:/root/.npm`,
      // Privileged, as kind's node containers are: runc inside needs every capability and no seccomp filter of nspawn's.
      '--capability=all'],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, SYSTEMD_SECCOMP: '0' } });
    nspawn.stdout!.pipe(out);
    nspawn.stderr!.pipe(out);
    let pid1 = 0;
    const cleanupEarly = async (err: unknown): Promise<never> => {
      const node = new KindNode(dir, root, nspawn, name, hierarchies, consoleLog, pid1);
      await node.shutdown().catch(() => undefined);
      throw err;
    };
    try {
      const deadline = Date.now() + 60_000;
      while (!pid1) {
        if (nspawn.exitCode !== null) throw new Error(`systemd-nspawn exited with ${nspawn.exitCode}: ${await readFile(consoleLog, 'utf8')}`);
        if (Date.now() > deadline) throw new Error(`the node's systemd did not start within 60 s: ${await readFile(consoleLog, 'utf8')}`);
        await sleep(200);
        pid1 = await initOf(name);
      }
      const node = new KindNode(dir, root, nspawn, name, hierarchies, consoleLog, pid1);
      // systemctl's --wait needs systemd's own socket, which a slow machine's node may not have made yet when its
      // PID 1 is there: until then systemctl fails at once ("Failed to connect to bus"), and is asked again.
      const upBy = Date.now() + 120_000;
      const ask = () => node.exec(['systemctl', 'is-system-running', '--wait'], { reject: false, timeout: Math.max(1000, upBy - Date.now()) });
      let state = await ask();
      while (/Failed to connect to bus/.test(state.stderr) && Date.now() < upBy) {
        await sleep(500);
        state = await ask();
      }
      if (!/running|degraded/.test(state.stdout)) {
        throw new Error(`the node's systemd did not come up (systemctl is-system-running: exit ${state.exitCode}, "${state.stdout}", ${state.stderr}): ${await readFile(consoleLog, 'utf8')}`);
      }
      await node.writableCgroups();
      return node;
    } catch (err) {
      return cleanupEarly(err);
    }
  }

  /** Runs a command inside the node: its namespaces, its root, a login-like environment. */
  async exec(cmd: string[], options: { reject?: boolean; timeout?: number } = {}): Promise<{ exitCode: number; stdout: string; stderr: string }> {
    const r = await execa('nsenter', [`--target=${this.pid1}`, '--mount', '--uts', '--ipc', '--net', '--pid', '--cgroup', '--root',
      // env, not nsenter, changes to the node's /: nsenter's --wd resolves it before entering the node's root.
      '--', 'env', '-i', '-C', '/', `PATH=${NODE_PATH}`, 'HOME=/root', 'LANG=C.UTF-8', 'TERM=dumb', ...cmd], { timeout: 60_000, ...options });
    return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), stderr: String(r.stderr) };
  }

  /** The host's PID of a process the node knows as `pid` (the node's PIDs are those of its own namespace). */
  async hostPid(pid: number): Promise<number> {
    for (const p of (await readdir('/proc')).filter((d) => /^\d+$/.test(d))) {
      const nspid = /^NSpid:\s+(.*)$/m.exec(await readFile(`/proc/${p}/status`, 'utf8').catch(() => ''))?.[1]?.split(/\s+/);
      if (nspid?.[1] === String(pid) && new RegExp(`:/${this.cgroup}(/|$)`, 'm').test(await readFile(`/proc/${p}/cgroup`, 'utf8').catch(() => ''))) return Number(p);
    }
    throw new Error(`no process of the node has PID ${pid} there`);
  }

  /** A path inside the node, as the host reaches it (through its PID 1's root). */
  path(p: string): string {
    // An absolute symlink met below /proc/<pid>/root resolves against the host's root: the node's /var/run is one.
    return `/proc/${this.pid1}/root${p.replace(/^\/var\/run(?=\/|$)/, '/run')}`;
  }

  /**
   * On cgroup v1, nspawn mounts the controllers read-only in the node; runc there needs them writable to make
   * its containers' cgroups (the node's cgroup namespace keeps them below the node's own).
   */
  private async writableCgroups(): Promise<void> {
    const mounts = (await readFile(`/proc/${this.pid1}/mounts`, 'utf8')).split('\n').map((l) => l.split(' '));
    for (const [, target, fstype, opts] of mounts) {
      if (fstype === 'cgroup' && target?.startsWith('/sys/fs/cgroup/') && /(^|,)ro(,|$)/.test(opts ?? '')) {
        // Only this mount's flag: the controller's superblock is the host's, mounted read-write there.
        await this.exec(['mount', '-o', 'remount,bind,rw', target]);
      }
    }
  }

  /** Powers the node off, waits for nspawn, and removes what it left on the host: its cgroups, the bridge, its files. */
  async shutdown(): Promise<void> {
    if (this.nspawn.exitCode === null && this.nspawn.signalCode === null) {
      const exited = once(this.nspawn, 'exit');
      // SIGTERM asks nspawn to power the node off cleanly (systemd gets SIGRTMIN+3).
      this.nspawn.kill('SIGTERM');
      const timer = setTimeout(() => this.nspawn.kill('SIGKILL'), 90_000);
      await exited;
      clearTimeout(timer);
    }
    if (this.pid1) {
      for (let i = 0; i < 50 && existsSync(`/proc/${this.pid1}`); i++) await sleep(100);
    }
    for (const h of this.hierarchies) await removeCgroupTree(join(h, this.cgroup));
    await execa('ip', ['link', 'del', NODE_BRIDGE], { reject: false });
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** The node's PID 1: the process in the node's cgroup that is PID 1 of a PID namespace of its own. */
async function initOf(cgroup: string): Promise<number> {
  for (const p of (await readdir('/proc')).filter((d) => /^\d+$/.test(d))) {
    const [status, cgroups] = await Promise.all([readFile(`/proc/${p}/status`, 'utf8').catch(() => ''), readFile(`/proc/${p}/cgroup`, 'utf8').catch(() => '')]);
    if (/^NSpid:\s+\d+\s+1$/m.test(status) && new RegExp(`:/${cgroup}(/|$)`, 'm').test(cgroups)) return Number(p);
  }
  return 0;
}

/**
 * What a node test that was killed outright (no after hook) left: its node still running in its cgroups, its
 * work directory. Each carries the test process's PID; only those whose test process is gone are removed.
 */
async function removeStaleNodes(log: (line: string) => void): Promise<void> {
  const gone = (name: string) => { const pid = Number(/^minicri-node-(\d+)/.exec(name)?.[1]); return pid > 0 && !existsSync(`/proc/${pid}`); };
  for (const h of await cgroupHierarchies()) {
    for (const name of (await readdir(h).catch(() => [])).filter((n) => n.startsWith('minicri-node-') && gone(n))) {
      log(`removing the node a killed test left: ${join(h, name)}`);
      const procs = await execa('sh', ['-c', `cat $(find '${join(h, name)}' -name cgroup.procs)`], { reject: false });
      for (const pid of procs.stdout.split('\n').filter(Boolean)) { try { process.kill(Number(pid), 'SIGKILL'); } catch { /* gone */ } }
      await removeCgroupTree(join(h, name));
      await execa('ip', ['link', 'del', NODE_BRIDGE], { reject: false });
    }
  }
  for (const name of (await readdir('/var/tmp').catch(() => [])).filter((n) => n.startsWith('minicri-node-') && gone(n))) {
    await rm(join('/var/tmp', name), { recursive: true, force: true });
  }
}

/** Removes a cgroup and everything below it, deepest first (each must be empty of processes by now). */
async function removeCgroupTree(dir: string): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => null);
  if (!entries) return;
  for (const e of entries) if (e.isDirectory()) await removeCgroupTree(join(dir, e.name));
  for (let i = 0; ; i++) {
    try {
      await rmdir(dir);
      return;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return;
      if (code !== 'EBUSY' || i >= 50) throw err;
      await sleep(100);
    }
  }
}
