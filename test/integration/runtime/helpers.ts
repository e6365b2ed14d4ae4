// Shared setup for the runtime integration tests: a private runc root and state dir per test,
// busybox bundles with a hand-written minimal OCI config, and cleanup that removes everything made.
import type { TestContext } from 'node:test';
import { mkdtemp, mkdir, rm, writeFile, rmdir, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { liveProcesses } from '../../../oci/runtime/processes.js';
import { OciRuntime } from '../../../oci/runtime/runc.js';
import { silentLogger } from '../../../core/log.js';
import { makeBusyboxRootfs } from '../../support/rootfs.js';

export const RUNC = '/usr/sbin/runc';
export const CONMON = '/usr/bin/conmon';
/** Parent cgroup of every test container (cgroupfs driver). */
export const CGROUP_PARENT = '/minicri-rt-test';
const CGROUP_ROOT = '/sys/fs/cgroup';

export interface Env {
  rt: OciRuntime;
  dir: string;
  root: string;
  stateDir: string;
  /** Make a bundle for `id` running `args` (busybox rootfs) and return its path. */
  bundle(id: string, args: string[], o?: BundleOptions): Promise<string>;
  logPath(id: string): string;
}

export interface BundleOptions {
  /** OCI linux.resources */
  resources?: object;
  /** Extra files for the rootfs: { '/path/inside': hostPath } */
  extra?: Record<string, string>;
}

let seq = 0;
/** A container id unique to this process and test. */
export function uniqueId(prefix: string): string {
  return `${prefix}-${process.pid}-${++seq}-${Math.random().toString(36).slice(2, 6)}`;
}

/** `criuPath`: the CRIU runc checkpoints with (test/support/criu.ts picks one that works). */
export async function setup(t: TestContext, o: { criuPath?: string } = {}): Promise<Env> {
  const dir = await mkdtemp(join(tmpdir(), 'minicri-rt-'));
  const root = join(dir, 'runc');
  const stateDir = join(dir, 'state');
  const rt = new OciRuntime({ runtimePath: RUNC, conmonPath: CONMON, root, stateDir, log: silentLogger, cgroupManager: 'cgroupfs', criuPath: o.criuPath });
  const ids: string[] = [];
  t.after(async () => {
    // Everything runc still knows about goes, whatever state the test left it in.
    for (const id of await rt.list().catch(() => [] as string[])) {
      await rt.delete(id, { force: true }).catch(() => undefined);
    }
    for (const id of ids) await removeCgroup(id);
    await removeCgroupParentIfEmpty();
    await rm(dir, { recursive: true, force: true });
  });
  return {
    rt,
    dir,
    root,
    stateDir,
    logPath: (id) => join(dir, 'logs', `${id}.log`),
    async bundle(id, args, o = {}) {
      ids.push(id);
      const b = join(dir, 'bundles', id);
      await makeBusyboxRootfs(join(b, 'rootfs'), o.extra);
      await mkdir(join(dir, 'logs'), { recursive: true });
      await writeFile(join(b, 'config.json'), JSON.stringify(minimalConfig(id, args, o.resources)));
      return b;
    },
  };
}

/** A small OCI config, written by hand: own namespaces (network included: only lo), default caps. */
export function minimalConfig(id: string, args: string[], resources?: object): object {
  const caps = ['CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FOWNER', 'CAP_FSETID', 'CAP_KILL', 'CAP_SETGID', 'CAP_SETUID', 'CAP_NET_BIND_SERVICE'];
  return {
    ociVersion: '1.0.2',
    process: {
      terminal: false,
      user: { uid: 0, gid: 0 },
      args,
      env: ['PATH=/bin', 'HOME=/root'],
      cwd: '/',
      capabilities: { bounding: caps, effective: caps, permitted: caps },
      noNewPrivileges: true,
    },
    root: { path: 'rootfs', readonly: false },
    hostname: 'rt-test',
    mounts: [
      { destination: '/proc', type: 'proc', source: 'proc' },
      { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'] },
      { destination: '/dev/pts', type: 'devpts', source: 'devpts', options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620'] },
      { destination: '/dev/shm', type: 'tmpfs', source: 'shm', options: ['nosuid', 'noexec', 'nodev', 'mode=1777', 'size=65536k'] },
      { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
    ],
    linux: {
      cgroupsPath: `${CGROUP_PARENT}/${id}`,
      namespaces: [{ type: 'pid' }, { type: 'ipc' }, { type: 'uts' }, { type: 'mount' }, { type: 'network' }],
      ...(resources ? { resources } : {}),
      maskedPaths: ['/proc/kcore', '/proc/keys', '/sys/firmware'],
      readonlyPaths: ['/proc/sys', '/proc/sysrq-trigger'],
    },
  };
}

async function removeCgroup(id: string): Promise<void> {
  for (const c of await readdir(CGROUP_ROOT).catch(() => [] as string[])) {
    await rmdir(join(CGROUP_ROOT, c, CGROUP_PARENT, id)).catch(() => undefined);
  }
}

async function removeCgroupParentIfEmpty(): Promise<void> {
  for (const c of await readdir(CGROUP_ROOT).catch(() => [] as string[])) {
    await rmdir(join(CGROUP_ROOT, c, CGROUP_PARENT)).catch(() => undefined); // fails while other tests use it
  }
}

/** Whether any controller still has a cgroup for the container. */
export async function cgroupExists(id: string): Promise<boolean> {
  for (const c of await readdir(CGROUP_ROOT)) {
    if (await readdir(join(CGROUP_ROOT, c, CGROUP_PARENT, id)).then(() => true, () => false)) return true;
  }
  return false;
}

/** Live (non-zombie) conmon processes whose command line mentions `needle`. */
export async function conmonsMentioning(needle: string): Promise<number[]> {
  return (await liveProcesses('conmon', needle)).map((p) => p.pid);
}

/** runc's list for a root, straight from runc. */
export async function runcIds(root: string): Promise<string[]> {
  const r = await execa(RUNC, ['--root', root, 'list', '--format', 'json']);
  return ((JSON.parse(r.stdout) as { id: string }[] | null) ?? []).map((c) => c.id);
}

export async function waitFor<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
