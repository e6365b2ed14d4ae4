// What a test may leave on the host, in one definition shared by the per-suite checks and the check
// around each whole run (run-suite.ts): processes of the kinds tests start, network links of every kind,
// iptables and ip6tables chains and rules, nft tables, mounts, loop devices, netns pins, cgroups, runc
// state, CNI caches and IP reservations, the tests' temp dirs, and the host sysctls tests may change.
// A snapshot is taken before, and what differs after (a new object, a link that did not come back, a
// sysctl with another value) is a leak. Where a kind is open-ended (processes), only the kinds tests make
// are listed, so another user of the machine does not fail the run and a difference names the leak.
// Caches under /var/cache are not objects a test leaves: the daemons tests and the bench start run as root
// through dist/server/main.js and so share the installed daemon's compile cache (/var/cache/minicri/compile),
// whose entries Node keys by each file's path and content, as the node tests keep theirs in minicri-test.
import type { Dirent } from 'node:fs';
import { readdir, readFile, readlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { execa } from 'execa';
import { cgroupHierarchies } from '../../oci/runtime/cgroups.js';
import { parseProcStat } from '../../oci/runtime/runc-state.js';

export interface HostSnapshot {
  /** "<kind> <pid>: <argv>" of live processes of the kinds tests start (see processKind). */
  processes: string[];
  /** "<kind> <name>" of every link in the host's network namespace ("device" when it has no kind). */
  links: string[];
  /** "<iptables|ip6tables> -t <table> <-N chain | -A rule>" of every table, counters left out. */
  iptables: string[];
  /** "<family> <table>" of nft tables, but the ones iptables-nft keeps (listed under iptables). */
  nft: string[];
  /** Every mount point of the host's mount namespace. */
  mounts: string[];
  /** "<device> <backing file>" of attached loop devices. */
  loops: string[];
  /** Names under /var/run/netns. */
  netns: string[];
  /** "<hierarchy>:<path>" of cgroups named like a container or sandbox id, or below a minicri* parent. */
  cgroups: string[];
  /** runc state directories under the roots the daemon and the tests use. */
  runc: string[];
  /** CNI result cache files, in the default cache dir and the test networks' own. */
  cni: string[];
  /** host-local reservation files: "<data dir>/<network>/<ip>". */
  ipam: string[];
  /** The tests' temp dirs in os.tmpdir() and /var/tmp. */
  tmp: string[];
  /** "<name>=<value>" of the host sysctls tests or the plugins they run may change. */
  sysctls: string[];
  /**
   * Why a kind could not be listed (its tool failed or is not installed): that kind's list is empty and
   * means nothing, so the check reports the reason as a difference rather than passing on it.
   */
  unchecked: Partial<Record<LeakKind, string>>;
}

export type LeakKind = Exclude<keyof HostSnapshot, 'unchecked'>;
const KINDS: LeakKind[] = ['processes', 'links', 'iptables', 'nft', 'mounts', 'loops', 'netns', 'cgroups', 'runc', 'cni', 'ipam', 'tmp', 'sysctls'];

/**
 * Kinds a suite's fixture still holds when its own check runs and puts back right after it (its temp
 * dirs, the forwarding sysctl its bridge turned on): only the check around the whole run sees these.
 */
const RUN_ONLY: LeakKind[] = ['tmp', 'sysctls'];

/**
 * Chains portmap and the firewall plugin make on first use and share between pods; they hold only jumps
 * into per-pod chains (which are leaks when left). A test network's fixture removes them after its check.
 */
export const SHARED_CNI_CHAINS = ['CNI-HOSTPORT-DNAT', 'CNI-HOSTPORT-SETMARK', 'CNI-HOSTPORT-MASQ', 'CNI-FORWARD', 'CNI-ADMIN'];

/** Where tests make temp dirs: os.tmpdir(), and /var/tmp for what is too big for a tmpfs (the VM test's disks). */
const TMP_DIRS = [...new Set([tmpdir(), '/var/tmp'])];
/** Temp dirs tests make (every mkdtemp in test/ and bench/): minicri-*, test networks' mcnt-*, the mounter test's mcri-*. */
const TEST_TMP = /^(minicri|mcnt|mcri)-/;
const HEX64 = /^[0-9a-f]{64}$/;
const CGROUP_ROOT = '/sys/fs/cgroup';
const CNI_BIN_DIRS = ['/usr/lib/cni', '/opt/cni/bin'];

/**
 * Host sysctls a run may change: forwarding (the bridge plugin turns it on for a gateway bridge),
 * bridge netfilter (on once br_netfilter is loaded), route_localnet (portmap), and the ones the tests
 * set in pod namespaces and check stayed there, or that pods ask for and must be refused.
 */
const WATCHED_SYSCTLS = [
  'net.ipv4.ip_forward', 'net.ipv6.conf.all.forwarding', 'net.ipv6.conf.default.forwarding',
  'net.bridge.bridge-nf-call-iptables', 'net.bridge.bridge-nf-call-ip6tables', 'net.bridge.bridge-nf-call-arptables',
  'net.ipv4.conf.all.route_localnet', 'net.ipv4.ip_unprivileged_port_start', 'net.ipv4.ping_group_range',
  'net.ipv4.ip_local_port_range', 'kernel.panic',
];

async function dirs(path: string): Promise<string[]> {
  const entries = await readdir(path, { withFileTypes: true }).catch(() => [] as Dirent[]);
  return entries.filter((e) => e.isDirectory()).map((e) => e.name);
}

async function testTmpDirs(): Promise<string[]> {
  const found = await Promise.all(TMP_DIRS.map(async (tmp) => (await readdir(tmp).catch(() => [] as string[])).filter((d) => TEST_TMP.test(d)).map((d) => join(tmp, d))));
  return found.flat();
}

const NAMED_PROCESSES: Record<string, string> = {
  conmon: 'conmon', pause: 'pause', 'docker-registry': 'registry', criu: 'criu', runc: 'runc', crun: 'runc',
  'minicri-streamhelper': 'helper', 'minicri-mounter': 'helper', containerd: 'containerd', 'systemd-nspawn': 'nspawn',
  kubectl: 'tool', sleep: 'tool', socat: 'tool', debootstrap: 'tool',
};

/**
 * The kind of a process tests start, or undefined for any other: a process in another pid namespace (a
 * container's, the node test's systemd), one of the programs tests and the daemon run, a CNI plugin
 * (the dhcp one stays running), a minicri daemon, or a node helper (test support, bench, inline script).
 * Exported for the unit test.
 */
export function processKind(argv: string[], foreignPidns: boolean): string | undefined {
  const argv0 = argv[0] ?? '';
  const name = basename(argv0);
  if (foreignPidns) return 'container process';
  if (NAMED_PROCESSES[name]) return NAMED_PROCESSES[name];
  if (name.startsWith('qemu-system-')) return 'qemu';
  if (name.startsWith('containerd-shim')) return 'containerd';
  if (CNI_BIN_DIRS.some((d) => argv0.startsWith(`${d}/`)) || argv.some((a) => a.includes('/cni-plugins/'))) return 'cni plugin';
  if (/^node(js)?$/.test(name)) {
    if (argv.some((a) => a.endsWith('/server/main.js'))) return 'daemon';
    if (argv.some((a) => /\/test\/support\/[^/]+\.js$|\/dist\/bench\/.+\.js$/.test(a) || a === '-e' || a === '--eval')) return 'test helper';
  }
  return undefined;
}

/** This process and its ancestors up to PID 1. */
async function selfAndAncestors(): Promise<Set<number>> {
  const found = new Set<number>([1]);
  for (let pid = process.pid; pid > 1 && !found.has(pid);) {
    found.add(pid);
    pid = await readFile(`/proc/${pid}/stat`, 'utf8').then((s) => parseProcStat(s).ppid, () => 0);
  }
  return found;
}

/**
 * Live processes of the kinds tests start. A zombie has exited (it only waits for its reaper) and is not
 * one, nor is the mount helper of the checking process itself: it lives as long as that process and goes
 * when its stdin closes (the mounter test proves it), so a check from inside a test file would see it.
 * Outside containers, a process counts only when its parent is the checking process or one of that one's
 * ancestors: a test's own child, or one orphaned and adopted by PID 1 (or by the subreaper a CI agent may
 * be) once its test exited. Processes of another user of the machine (a shell's sleep, another checkout's
 * test daemon) have parents of their own and are not listed.
 */
async function ourProcesses(): Promise<string[]> {
  const ownPidns = await readlink('/proc/self/ns/pid');
  const adopters = await selfAndAncestors();
  const found: string[] = [];
  for (const entry of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const [cmdline, stat, pidns] = await Promise.all([
        readFile(`/proc/${entry}/cmdline`, 'utf8'), readFile(`/proc/${entry}/stat`, 'utf8'), readlink(`/proc/${entry}/ns/pid`),
      ]);
      // Kernel threads have no command line.
      const { state, ppid } = parseProcStat(stat);
      if (cmdline === '' || state === 'Z') continue;
      const argv = cmdline.replace(/\0$/, '').split('\0');
      if (ppid === process.pid && basename(argv[0] ?? '') === 'minicri-mounter') continue;
      const kind = processKind(argv, pidns !== ownPidns);
      if (kind !== 'container process' && !adopters.has(ppid)) continue;
      if (kind) found.push(`${kind} ${entry}: ${argv.join(' ').replace(/\s+/g, ' ').slice(0, 200)}`);
    } catch {
      // the process went away while we looked
    }
  }
  return found;
}

async function allMounts(): Promise<string[]> {
  const points = (await readFile('/proc/self/mounts', 'utf8')).split('\n').filter(Boolean)
    .map((l) => (l.split(' ')[1] ?? '').replace(/\\040/g, ' '));
  // A netns dir (the host's, a test daemon's) is made a shared mount point of its own once and kept so, as
  // `ip netns` does: the pins in it count, it does not (a test daemon's goes with its temp dir, which counts).
  return points.filter((m) => !m.endsWith('/netns'));
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
  for (const h of (await cgroupHierarchies()).filter((m) => m === CGROUP_ROOT || m.startsWith(`${CGROUP_ROOT}/`))) await walk(h, [], 1);
  return found;
}

/**
 * The rules and user chains of an `iptables-save` dump, one entry each, as the command that makes them.
 * Built-in chains and their policies are left out (a table the kernel loads on first use is no leak), and
 * so are counters. Exported for the unit test.
 */
export function parseIptablesSave(command: 'iptables' | 'ip6tables', dump: string): string[] {
  const found: string[] = [];
  let table = '';
  for (const raw of dump.split('\n')) {
    const line = raw.replace(/^\[\d+:\d+\] /, '');
    if (line.startsWith('*')) table = line.slice(1).trim();
    const chain = /^:(\S+) - /.exec(line)?.[1];
    if (chain) found.push(`${command} -t ${table} -N ${chain}`);
    if (line.startsWith('-A ')) found.push(`${command} -t ${table} ${line}`);
  }
  return found;
}

/** A listing tool's failure, with the reason the check reports for its kind. */
class ProbeError extends Error {}

/** The output of a tool that lists host objects; a failure or a missing tool throws a ProbeError naming `what`. */
async function probe(what: string, command: string, args: string[]): Promise<string> {
  const out = await execa(command, args, { reject: false });
  if (out.code === 'ENOENT') throw new ProbeError(`not checked: ${command} is not installed`);
  if (out.failed) throw new ProbeError(`could not check ${what}: ${out.shortMessage}${out.stderr ? `: ${String(out.stderr).trim()}` : ''}`);
  return String(out.stdout);
}

/** Parses a tool's JSON output, a parse failure being the tool's failure. */
function parseJson<T>(what: string, text: string): T {
  try {
    return JSON.parse(text) as T;
  } catch (err) {
    throw new ProbeError(`could not check ${what}: unreadable output: ${(err as Error).message}`);
  }
}

async function firewall(): Promise<string[]> {
  const dumps = await Promise.all((['iptables', 'ip6tables'] as const).map(async (command) =>
    parseIptablesSave(command, await probe(`${command} rules`, `${command}-save`, []))));
  return dumps.flat();
}

/** iptables-nft's own tables, which iptables-save lists rule by rule. */
const XTABLES = new Set(['filter', 'nat', 'mangle', 'raw', 'security']);

async function nftTables(): Promise<string[]> {
  const out = await probe('nft tables', 'nft', ['-j', 'list', 'tables']);
  const items = parseJson<{ nftables?: { table?: { family: string; name: string } }[] }>('nft tables', out).nftables ?? [];
  return items.flatMap((i) => (i.table && !(['ip', 'ip6'].includes(i.table.family) && XTABLES.has(i.table.name)) ? [`${i.table.family} ${i.table.name}`] : []));
}

async function links(): Promise<string[]> {
  const out = await probe('network links', 'ip', ['-j', '-d', 'link', 'show']);
  const list = parseJson<{ ifname: string; linkinfo?: { info_kind?: string } }[]>('network links', out);
  return list.map((l) => `${l.linkinfo?.info_kind ?? 'device'} ${l.ifname}`);
}

async function loopDevices(): Promise<string[]> {
  // losetup prints nothing at all when no loop device is attached.
  const out = await probe('loop devices', 'losetup', ['-J']);
  if (!out.trim()) return [];
  const list = parseJson<{ loopdevices?: { name: string; 'back-file'?: string }[] }>('loop devices', out).loopdevices ?? [];
  return list.map((l) => `${l.name} ${l['back-file'] ?? ''}`.trim());
}

async function files(dir: string, pattern = /./): Promise<string[]> {
  return (await readdir(dir).catch(() => [] as string[])).filter((f) => pattern.test(f)).map((f) => join(dir, f));
}

/** libcni's result cache (`<cache dir>/results/<network>-<id>-<if>`), by default and in the test networks. */
async function cniCache(): Promise<string[]> {
  const cacheDirs = ['/var/lib/cni', ...(await testTmpDirs()).map((d) => join(d, 'cache'))];
  return (await Promise.all(cacheDirs.map((d) => files(join(d, 'results'))))).flat();
}

/** host-local's files, one per reserved IP, in its default data dir and in the test networks' own. */
async function ipReservations(): Promise<string[]> {
  const dataDirs = ['/var/lib/cni/networks', ...(await testTmpDirs()).map((d) => join(d, 'ipam'))];
  const found: string[] = [];
  for (const dataDir of dataDirs) {
    for (const network of await dirs(dataDir)) found.push(...await files(join(dataDir, network), /^[0-9.]+$|:/));
  }
  return found;
}

async function sysctls(): Promise<string[]> {
  const values = await Promise.all(WATCHED_SYSCTLS.map(async (name) => {
    const value = await readFile(`/proc/sys/${name.replace(/\./g, '/')}`, 'utf8').catch(() => undefined);
    return value === undefined ? [] : [`${name}=${value.trim().replace(/\s+/g, ' ')}`];
  }));
  return values.flat();
}

export async function hostSnapshot(): Promise<HostSnapshot> {
  const unchecked: HostSnapshot['unchecked'] = {};
  // A kind whose tool failed is listed empty, and the reason kept for the check to report.
  const probed = (kind: LeakKind, list: Promise<string[]>) => list.catch((err: unknown) => {
    if (!(err instanceof ProbeError)) throw err;
    unchecked[kind] = err.message;
    return [];
  });
  const [processes, linkList, iptables, nft, mounts, loops, netns, cgroups, runc, cni, ipam, tmp, sysctlList] = await Promise.all([
    ourProcesses(), probed('links', links()), probed('iptables', firewall()), probed('nft', nftTables()), allMounts(),
    probed('loops', loopDevices()), readdir('/var/run/netns').catch(() => [] as string[]),
    ourCgroups(), runcStateDirs(), cniCache(), ipReservations(), testTmpDirs(), sysctls(),
  ]);
  const sorted = (a: string[]) => [...new Set(a)].sort();
  return {
    processes: sorted(processes), links: sorted(linkList), iptables: sorted(iptables), nft: sorted(nft), mounts: sorted(mounts),
    loops: sorted(loops), netns: sorted(netns), cgroups: sorted(cgroups), runc: sorted(runc), cni: sorted(cni), ipam: sorted(ipam),
    tmp: sorted(tmp), sysctls: sorted(sysctlList), unchecked,
  };
}

/**
 * Objects a fixture made on purpose and removes itself after the check: exact entries, but for iptables,
 * "<table> <chain>" of chains it may hold (see networkFixtureObjects).
 */
export type Allowed = Partial<Record<LeakKind, string[]>>;

/** One line per difference, by kind; kinds without any left out. */
export type Leaks = Partial<Record<LeakKind, string[]>>;

/**
 * An iptables entry a fixture's shared chain explains: the chain itself, a jump into it, or one of its
 * fixed rules. Those name no address and end in a built-in target (MASQUERADE, MARK); a rule naming a
 * pod's address or jumping to a pod's chain is that pod's, and a leak.
 */
function iptablesAllowed(entry: string, chains: string[]): boolean {
  const m = /^\S+ -t (\S+) (?:-N (\S+)$|-A (\S+) (.*))/.exec(entry);
  if (!m) return false;
  const [, table, declared, appendedTo, rule] = m;
  const allowed = (chain: string | undefined) => chain !== undefined && chains.includes(`${table} ${chain}`);
  if (declared) return allowed(declared);
  const target = /(?:^| )-j (\S+)/.exec(rule!)?.[1];
  return allowed(target) || (allowed(appendedTo) && /^[A-Z]+$/.test(target ?? '') && !/\d+\.\d+\.\d+\.\d+|[0-9a-f]*:[0-9a-f:]*\/\d+/.test(rule!));
}

/**
 * What differs between two snapshots, for the kinds asked: objects `after` holds that `before` did not
 * (beyond `allowed`), links that are gone (a host device a pod took and did not give back), and sysctls
 * with another value. A kind either snapshot could not list is reported with the reason, never passed.
 * Pure, so the unit test feeds it snapshots.
 */
export function diffSnapshots(before: HostSnapshot, after: HostSnapshot, allowed: Allowed = {}, kinds: LeakKind[] = KINDS): Leaks {
  const leaks: Leaks = {};
  for (const k of kinds) {
    const unchecked = [...new Set([before.unchecked[k], after.unchecked[k]])].filter((why) => why !== undefined);
    if (unchecked.length > 0) {
      leaks[k] = unchecked;
      continue;
    }
    const isAllowed = (x: string) => (k === 'iptables' ? iptablesAllowed(x, allowed.iptables ?? []) : (allowed[k] ?? []).includes(x));
    let found: string[];
    if (k === 'sysctls') {
      const was = new Map(before.sysctls.map((s) => [s.slice(0, s.indexOf('=')), s.slice(s.indexOf('=') + 1)]));
      found = after.sysctls.filter((s) => !before.sysctls.includes(s))
        .map((s) => `${s} (was ${was.get(s.slice(0, s.indexOf('='))) ?? 'unset'})`);
    } else {
      found = after[k].filter((x) => !before[k].includes(x) && !isAllowed(x));
      if (k === 'links') found.push(...before.links.filter((x) => !after.links.includes(x) && !isAllowed(x)).map((x) => `${x} is gone (it was there before)`));
    }
    if (found.length > 0) leaks[k] = found;
  }
  return leaks;
}

/** What the host holds now that `before` did not, by kind. */
export async function leaksSince(before: HostSnapshot, allowed: Allowed = {}, kinds: LeakKind[] = KINDS): Promise<Leaks> {
  return diffSnapshots(before, await hostSnapshot(), allowed, kinds);
}

/** One line per leaked object, for a failure message a person can act on. */
export function describeLeaks(leaks: Leaks): string {
  return KINDS.filter((k) => leaks[k]?.length).map((k) => leaks[k]!.map((x) => `  ${k}: ${x}`).join('\n')).join('\n');
}

/**
 * The leaks still there after `settleMs`: a process told to stop may take a moment to exit, so a leak
 * must outlast a short settle to count.
 */
export async function settledLeaks(before: HostSnapshot, settleMs: number, allowed: Allowed = {}, kinds: LeakKind[] = KINDS): Promise<Leaks> {
  let leaks = await leaksSince(before, allowed, kinds);
  for (let waited = 0; waited < settleMs && Object.keys(leaks).length > 0; waited += 100) {
    await new Promise((r) => setTimeout(r, 100));
    leaks = await leaksSince(before, allowed, kinds);
  }
  return leaks;
}

/**
 * Fails when the host holds anything the snapshot did not (beyond `allowed`), for a suite's check:
 * every kind but what a fixture removes only after it (RUN_ONLY).
 */
export async function assertNothingLeft(before: HostSnapshot, what = 'the test', allowed: Allowed = {}): Promise<void> {
  const leaks = await settledLeaks(before, 2000, allowed, KINDS.filter((k) => !RUN_ONLY.includes(k)));
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
