// floor: the lifecycle's work done directly with the underlying tools, timed with the same step names, so each
// RPC can be set against the cost of what it must do at least:
//   RunPodSandbox    ip netns add, lo up, the bridge CNI plugin's ADD, the pause bundle, runc create + start
//   CreateContainer  an overlay mount of the image's layer, the bundle, runc create
//   StartContainer   runc start
//   StopContainer    runc kill KILL (the bench image's stop signal), until the process is gone
//   RemoveContainer  runc delete, unmount, remove the bundle
//   StopPodSandbox   runc kill KILL of the pause, until gone; the plugin's DEL
//   RemovePodSandbox runc delete of the pause, ip netns del, remove the bundle
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { PAUSE_BINARY } from '../pod/pause-image.js';
import { makeBusyboxRootfs } from '../test/support/rootfs.js';
import { CGROUP_PARENT, CNI_BIN, FLOOR_NETNS_PREFIX, NETWORK, type BenchEnv } from './lib/env.js';
import { lifecycleSummary, type LifecycleResult, type LifecycleSamples } from './lifecycle.js';
import { SLEEPER } from './lib/pods.js';
import { exited } from './lib/proc.js';
import { timed } from './lib/stats.js';

const CAPS = ['CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FOWNER', 'CAP_FSETID', 'CAP_KILL', 'CAP_SETGID', 'CAP_SETUID', 'CAP_SETPCAP',
  'CAP_NET_BIND_SERVICE', 'CAP_NET_RAW', 'CAP_SYS_CHROOT', 'CAP_MKNOD', 'CAP_AUDIT_WRITE', 'CAP_SETFCAP'];

type Ns = { type: string; path?: string };

function ociConfig(id: string, args: string[], rootfs: string, namespaces: Ns[], user: number, readonly: boolean): object {
  return {
    ociVersion: '1.0.2',
    process: {
      terminal: false, user: { uid: user, gid: user }, args, env: ['PATH=/bin'], cwd: '/',
      capabilities: { bounding: CAPS, effective: CAPS, permitted: CAPS }, noNewPrivileges: true, oomScoreAdj: 0,
    },
    root: { path: rootfs, readonly },
    hostname: 'floor',
    mounts: [
      { destination: '/proc', type: 'proc', source: 'proc', options: ['nosuid', 'noexec', 'nodev'] },
      { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'] },
      { destination: '/dev/pts', type: 'devpts', source: 'devpts', options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620'] },
      { destination: '/dev/shm', type: 'tmpfs', source: 'shm', options: ['nosuid', 'noexec', 'nodev', 'mode=1777', 'size=65536k'] },
      { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
    ],
    linux: {
      cgroupsPath: `${CGROUP_PARENT}/floor/${id}`,
      namespaces,
      maskedPaths: ['/proc/kcore', '/proc/keys', '/sys/firmware'],
      readonlyPaths: ['/proc/sys', '/proc/sysrq-trigger'],
    },
  };
}

export interface FloorDirs {
  dir: string;
  /** The reference's runc, the one minicri's goal figures run on. */
  runc: string;
  runcRoot: string;
  pauseRootfs: string;
  busybox: string;
}

export async function runc(d: FloorDirs, args: string[]): Promise<void> {
  const logFile = join(d.dir, 'runc.log');
  // stdio to /dev/null: the container's init inherits it, and a pipe would keep execa waiting.
  const r = await execa(d.runc, ['--root', d.runcRoot, '--log', logFile, ...args], { stdio: 'ignore', reject: false });
  if (r.exitCode !== 0) throw new Error(`runc ${args.join(' ')} failed (${r.exitCode}): ${(await readFile(logFile, 'utf8').catch(() => '')).slice(-500)}`);
}

async function cni(env: BenchEnv, command: 'ADD' | 'DEL', id: string, netns: string, prevResult?: unknown): Promise<unknown> {
  return bridgePlugin(NETWORK, env.bridgeConf, command, id, netns, 'eth0', prevResult);
}

/** One call of the bridge plugin (type in `conf`) for network `name` on `ifName`, as a runtime makes it. */
export async function bridgePlugin(name: string, conf: Record<string, unknown>, command: 'ADD' | 'DEL', id: string, netns: string, ifName: string, prevResult?: unknown): Promise<unknown> {
  const r = await execa(join(CNI_BIN, 'bridge'), [], {
    input: JSON.stringify({ cniVersion: '1.0.0', name, ...conf, ...(prevResult ? { prevResult } : {}) }),
    env: { CNI_COMMAND: command, CNI_CONTAINERID: id, CNI_NETNS: netns, CNI_IFNAME: ifName, CNI_PATH: CNI_BIN },
    extendEnv: false,
  });
  return r.stdout ? JSON.parse(String(r.stdout)) : undefined;
}

export async function waitExited(pid: number): Promise<void> {
  while (!(await exited(pid))) await new Promise((r) => setTimeout(r, 2));
}

/** The pause's bundle in `podDir`, joining the namespace at `nsPath`, created and started; resolves with its pid. */
export async function startPause(d: FloorDirs, id: string, podDir: string, nsPath: string): Promise<number> {
  await mkdir(podDir);
  await writeFile(join(podDir, 'config.json'), JSON.stringify(ociConfig(id, ['/pause'], d.pauseRootfs, [
    { type: 'network', path: nsPath }, { type: 'ipc' }, { type: 'uts' }, { type: 'pid' }, { type: 'mount' },
  ], 65535, true)));
  await runc(d, ['create', '--bundle', podDir, '--pid-file', join(podDir, 'pid'), id]);
  await runc(d, ['start', id]);
  return pidOf(join(podDir, 'pid'));
}

async function pidOf(file: string): Promise<number> {
  return Number((await readFile(file, 'utf8')).trim());
}

/** One lifecycle by hand; whatever it made is undone even when a step fails. */
async function oneFloor(env: BenchEnv, d: FloorDirs, i: number, into: LifecycleSamples): Promise<void> {
  const pod = `${FLOOR_NETNS_PREFIX}${i}`;
  const ctr = `${pod}-app`;
  const nsPath = `/var/run/netns/${pod}`;
  const podDir = join(d.dir, pod);
  const ctrDir = join(d.dir, ctr);
  const merged = join(ctrDir, 'rootfs');
  const local: LifecycleSamples = {};
  let netnsMade = false;
  let cniResult: unknown;
  let mounted = false;
  try {
    const pausePid = await timed(local, 'RunPodSandbox', async () => {
      await execa('ip', ['netns', 'add', pod]);
      netnsMade = true;
      await execa('ip', ['-n', pod, 'link', 'set', 'lo', 'up']);
      cniResult = await cni(env, 'ADD', pod, nsPath);
      return startPause(d, pod, podDir, nsPath);
    });
    await timed(local, 'CreateContainer', async () => {
      for (const sub of ['upper', 'work', 'rootfs']) await mkdir(join(ctrDir, sub), { recursive: true });
      await execa('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${d.busybox},upperdir=${join(ctrDir, 'upper')},workdir=${join(ctrDir, 'work')}`, merged]);
      mounted = true;
      await writeFile(join(ctrDir, 'config.json'), JSON.stringify(ociConfig(ctr, SLEEPER, merged, [
        { type: 'network', path: nsPath }, { type: 'ipc', path: `/proc/${pausePid}/ns/ipc` }, { type: 'uts', path: `/proc/${pausePid}/ns/uts` },
        { type: 'pid' }, { type: 'mount' },
      ], 0, false)));
      await runc(d, ['create', '--bundle', ctrDir, '--pid-file', join(ctrDir, 'pid'), ctr]);
    });
    await timed(local, 'StartContainer', () => runc(d, ['start', ctr]));
    await timed(local, 'StopContainer', async () => {
      const pid = await pidOf(join(ctrDir, 'pid'));
      await runc(d, ['kill', ctr, 'KILL']);
      await waitExited(pid);
    });
    await timed(local, 'RemoveContainer', async () => {
      await runc(d, ['delete', ctr]);
      await execa('umount', [merged]);
      mounted = false;
      await rm(ctrDir, { recursive: true });
    });
    await timed(local, 'StopPodSandbox', async () => {
      await runc(d, ['kill', pod, 'KILL']);
      await waitExited(pausePid);
      await cni(env, 'DEL', pod, nsPath, cniResult);
      cniResult = undefined;
    });
    await timed(local, 'RemovePodSandbox', async () => {
      await runc(d, ['delete', pod]);
      await execa('ip', ['netns', 'del', pod]);
      netnsMade = false;
      await rm(podDir, { recursive: true });
    });
    for (const [k, v] of Object.entries(local)) (into[k] ??= []).push(...v);
  } finally {
    await execa(d.runc, ['--root', d.runcRoot, 'delete', '--force', ctr], { reject: false });
    await execa(d.runc, ['--root', d.runcRoot, 'delete', '--force', pod], { reject: false });
    if (mounted) await execa('umount', ['-l', merged], { reject: false });
    if (cniResult) await cni(env, 'DEL', pod, nsPath, cniResult).catch(() => undefined);
    if (netnsMade) await execa('ip', ['netns', 'del', pod], { reject: false });
    await rm(ctrDir, { recursive: true, force: true });
    await rm(podDir, { recursive: true, force: true });
  }
}

/** Fresh floor directories: the pause's root filesystem and a busybox one (the caller removes `dir`). */
export async function floorDirs(env: BenchEnv): Promise<FloorDirs> {
  const dir = join(env.base, 'floor');
  const d: FloorDirs = { dir, runc: env.reference.runc, runcRoot: join(dir, 'runc'), pauseRootfs: join(dir, 'pause-rootfs'), busybox: join(dir, 'busybox') };
  await rm(dir, { recursive: true, force: true });
  await mkdir(d.pauseRootfs, { recursive: true });
  for (const sub of ['proc', 'sys', 'dev']) await mkdir(join(d.pauseRootfs, sub));
  await writeFile(join(d.pauseRootfs, 'pause'), await readFile(PAUSE_BINARY), { mode: 0o755 });
  await makeBusyboxRootfs(d.busybox);
  return d;
}

/** `n` timed lifecycles done by hand after one untimed warm-up, summarised like the CRI lifecycle. */
export async function floorBench(env: BenchEnv, n: number): Promise<LifecycleResult> {
  const d = await floorDirs(env);
  const samples: LifecycleSamples = {};
  const errors: string[] = [];
  for (let i = 0; i <= n; i++) {
    try {
      await oneFloor(env, d, i, i === 0 ? {} : samples);
    } catch (err) {
      errors.push((err as Error).message);
    }
  }
  await rm(d.dir, { recursive: true, force: true });
  return lifecycleSummary(samples, errors);
}
