// What a test may leave on the host, in one definition shared by the per-suite checks and the check
// around the whole integration run (integration-run.ts): netns pins, mounts, live conmon and pause
// processes, runc state, cgroups, iptables chains, veths and bridges, host-local IP reservations.
// A snapshot is taken before, and anything the host holds after that the snapshot did not is a leak.
// Only objects of the kinds tests make are listed (by name or by place), so the snapshot stays small
// and a difference names the leak precisely.
import type { Dirent } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { liveProcesses } from '../../oci/runtime/processes.js';

export interface HostSnapshot {
  /** Names under /var/run/netns. */
  netns: string[];
  /** Mount points of ours: named minicri, below the tests' temp dirs, or netns pins. */
  mounts: string[];
  /** Live conmon processes: "pid -c <container id>". */
  conmon: string[];
  /** Live pause processes (the sandbox's /pause): "pid". */
  pause: string[];
  /** runc state directories under the roots the daemon and the tests use. */
  runc: string[];
  /** "<hierarchy>:<path>" of cgroups named like a container or sandbox id, or below a minicri* parent. */
  cgroups: string[];
  /** "<table> <chain>" of CNI-* and minicri chains in the nat and filter tables. */
  iptables: string[];
  /** "<kind> <name>" of veth and bridge interfaces in the host's network namespace. */
  links: string[];
  /** host-local reservation files: "<data dir>/<network>/<ip>". */
  ipam: string[];
}

export type LeakKind = keyof HostSnapshot;
const KINDS: LeakKind[] = ['netns', 'mounts', 'conmon', 'pause', 'runc', 'cgroups', 'iptables', 'links', 'ipam'];

/**
 * Chains portmap and the firewall plugin make on first use and share between pods; they hold only jumps
 * into per-pod chains (which are leaks when left). A test network's fixture removes them after its check.
 */
export const SHARED_CNI_CHAINS = ['CNI-HOSTPORT-DNAT', 'CNI-HOSTPORT-SETMARK', 'CNI-HOSTPORT-MASQ', 'CNI-FORWARD', 'CNI-ADMIN'];

const TMP = tmpdir();
/** Temp dirs tests make: daemons' (minicri-*), CNI networks' (mcnt-*), the mounter test's (mcri-*). */
const TEST_TMP = /^(minicri|mcnt|mcri)-/;
const HEX64 = /^[0-9a-f]{64}$/;
const CGROUP_ROOT = '/sys/fs/cgroup';

async function dirs(path: string): Promise<string[]> {
  const entries = await readdir(path, { withFileTypes: true }).catch(() => [] as Dirent[]);
  return entries.filter((e) => e.isDirectory()).map((e) => e.name);
}

async function testTmpDirs(): Promise<string[]> {
  return (await dirs(TMP)).filter((d) => TEST_TMP.test(d)).map((d) => join(TMP, d));
}

/**
 * conmon processes still running. An exited conmon is reparented to PID 1 and stays a zombie until
 * PID 1 reaps it, which some VMs' init does late: a zombie holds nothing and is not a leak.
 */
async function liveConmons(): Promise<string[]> {
  return (await liveProcesses('conmon')).map((p) => {
    const i = p.argv.indexOf('-c');
    return `${p.pid} -c ${i >= 0 ? p.argv[i + 1] : p.argv.join(' ').slice(0, 120)}`;
  });
}

async function livePauses(): Promise<string[]> {
  return (await liveProcesses('pause')).map((p) => String(p.pid));
}

async function ourMounts(): Promise<string[]> {
  const points = (await readFile('/proc/self/mounts', 'utf8')).split('\n').map((l) => (l.split(' ')[1] ?? '').replace(/\\040/g, ' '));
  const ours = (m: string) => m.includes('minicri') || /^\/(var\/)?run\/netns\/./.test(m)
    || (m.startsWith(`${TMP}/`) && TEST_TMP.test(m.slice(TMP.length + 1)));
  // A netns dir is made a shared mount point of its own once and kept so, as `ip netns` does: the pins in it count, it does not.
  return points.filter((m) => ours(m) && !m.endsWith('/netns'));
}

/** runc keeps one directory per container below its --root. */
async function runcStateDirs(): Promise<string[]> {
  const roots = ['/run/runc', ...(await dirs('/run/minicri/runc')).map((h) => `/run/minicri/runc/${h}`)];
  for (const base of await testTmpDirs()) {
    // A test daemon's state dir (run/runc/<handler>), the runtime tests' private root (runc).
    for (const h of await dirs(join(base, 'run', 'runc'))) roots.push(join(base, 'run', 'runc', h));
    roots.push(join(base, 'runc'));
  }
  const found: string[] = [];
  for (const root of roots) for (const id of await dirs(root)) found.push(join(root, id));
  return found;
}

/** Every cgroup v1 hierarchy (or the single v2 one): the directories of /sys/fs/cgroup that are mount points. */
async function cgroupHierarchies(): Promise<string[]> {
  const mounts = (await readFile('/proc/self/mounts', 'utf8')).split('\n').map((l) => l.split(' '))
    .filter((f) => f[2] === 'cgroup' || f[2] === 'cgroup2').map((f) => f[1]!);
  return mounts.filter((m) => m === CGROUP_ROOT || m.startsWith(`${CGROUP_ROOT}/`));
}

/** A cgroup tests or the daemon make: named like an id (or systemd's minicri-<id>.scope), or below a minicri* parent. */
function cgroupIsOurs(segments: string[]): boolean {
  return segments.some((s) => HEX64.test(s) || /^minicri-[0-9a-f]{64}\.scope$/.test(s))
    || (segments.length >= 2 && segments[0]!.startsWith('minicri'));
}

async function ourCgroups(): Promise<string[]> {
  const found: string[] = [];
  const walk = async (hierarchy: string, rel: string[], depth: number): Promise<void> => {
    for (const d of await dirs(join(hierarchy, ...rel))) {
      const segments = [...rel, d];
      if (cgroupIsOurs(segments)) found.push(`${hierarchy.slice(CGROUP_ROOT.length + 1) || 'unified'}:/${segments.join('/')}`);
      if (depth < 6) await walk(hierarchy, segments, depth + 1);
    }
  };
  for (const h of await cgroupHierarchies()) await walk(h, [], 1);
  return found;
}

async function ourChains(): Promise<string[]> {
  const found: string[] = [];
  for (const table of ['nat', 'filter']) {
    const out = await execa('iptables', ['-w', '-t', table, '-S'], { reject: false });
    for (const line of String(out.stdout).split('\n')) {
      const chain = /^-N (\S+)/.exec(line)?.[1];
      if (chain && (chain.startsWith('CNI-') || /minicri/i.test(chain))) found.push(`${table} ${chain}`);
    }
  }
  return found;
}

async function ourLinks(): Promise<string[]> {
  const found: string[] = [];
  for (const kind of ['veth', 'bridge']) {
    const out = await execa('ip', ['-o', 'link', 'show', 'type', kind], { reject: false });
    for (const line of String(out.stdout).split('\n')) {
      const name = line.split(':')[1]?.trim().split('@')[0];
      if (name) found.push(`${kind} ${name}`);
    }
  }
  return found;
}

/** host-local's files, one per reserved IP, in its default data dir and in the test networks' own. */
async function ipReservations(): Promise<string[]> {
  const dataDirs = ['/var/lib/cni/networks', ...(await testTmpDirs()).map((d) => join(d, 'ipam'))];
  const found: string[] = [];
  for (const dataDir of dataDirs) {
    for (const network of await dirs(dataDir)) {
      const files = await readdir(join(dataDir, network)).catch(() => [] as string[]);
      for (const f of files) if (/^[0-9.]+$|:/.test(f)) found.push(join(dataDir, network, f));
    }
  }
  return found;
}

export async function hostSnapshot(): Promise<HostSnapshot> {
  const [netns, mounts, conmon, pause, runc, cgroups, iptables, links, ipam] = await Promise.all([
    readdir('/var/run/netns').catch(() => [] as string[]),
    ourMounts(),
    liveConmons(),
    livePauses(),
    runcStateDirs(),
    ourCgroups(),
    ourChains(),
    ourLinks(),
    ipReservations(),
  ]);
  const sorted = (a: string[]) => [...new Set(a)].sort();
  return {
    netns: sorted(netns), mounts: sorted(mounts), conmon: sorted(conmon), pause: sorted(pause), runc: sorted(runc),
    cgroups: sorted(cgroups), iptables: sorted(iptables), links: sorted(links), ipam: sorted(ipam),
  };
}

/** Objects a fixture made on purpose and removes itself after the check (its bridge, the shared chains). */
export type Allowed = Partial<Record<LeakKind, string[]>>;

/** What the host holds now that `before` did not, by kind; empty kinds left out. */
export async function leaksSince(before: HostSnapshot, allowed: Allowed = {}): Promise<Partial<HostSnapshot>> {
  const after = await hostSnapshot();
  const leaks: Partial<HostSnapshot> = {};
  for (const k of KINDS) {
    const extra = after[k].filter((x) => !before[k].includes(x) && !(allowed[k] ?? []).includes(x));
    if (extra.length > 0) leaks[k] = extra;
  }
  return leaks;
}

/** One line per leaked object, for a failure message a person can act on. */
export function describeLeaks(leaks: Partial<HostSnapshot>): string {
  return KINDS.filter((k) => leaks[k]?.length).map((k) => leaks[k]!.map((x) => `  ${k}: ${x}`).join('\n')).join('\n');
}

/**
 * Fails when the host holds anything the snapshot did not (beyond `allowed`). Processes that were
 * told to stop may take a moment to exit, so a leak must still be there after a short settle.
 */
export async function assertNothingLeft(before: HostSnapshot, what = 'the test', allowed: Allowed = {}): Promise<void> {
  let leaks = await leaksSince(before, allowed);
  for (let i = 0; i < 20 && Object.keys(leaks).length > 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
    leaks = await leaksSince(before, allowed);
  }
  if (Object.keys(leaks).length > 0) throw new Error(`${what} left behind:\n${describeLeaks(leaks)}`);
}

/** What a test network fixture makes itself and removes after its check: its bridge and the shared chains. */
export function networkFixtureObjects(bridge: string): Allowed {
  return {
    links: [`bridge ${bridge}`],
    iptables: ['nat', 'filter'].flatMap((t) => SHARED_CNI_CHAINS.map((c) => `${t} ${c}`)),
  };
}

/**
 * Checks the host against `before`, then runs `cleanup` whatever the check found: a leak fails the test
 * and the host is still tidied. Cleaning first would remove the very leaks the check is for. A failure
 * of the cleanup itself is reported too, after a leak if there was one.
 */
export async function checkThenClean(before: HostSnapshot | undefined, what: string, allowed: Allowed, cleanup: () => unknown): Promise<void> {
  let leak: unknown;
  try {
    // No snapshot: the fixture failed before it made anything, and its own error is reported.
    if (before) await assertNothingLeft(before, what, allowed);
  } catch (err) {
    leak = err;
  }
  try {
    await cleanup();
  } catch (err) {
    if (leak === undefined) throw err;
    throw new AggregateError([leak, err], `${(leak as Error).message}\n(and the cleanup after failed: ${(err as Error).message})`);
  }
  if (leak !== undefined) throw leak;
}
