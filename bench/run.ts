// `npm run bench`: every benchmark against minicri and the reference, containerd 2.1.5 (and the floor, for the
// lifecycle), in one run, the targets alternating within each round, each round started once the machine's
// 1-minute load average is under 1 (or the wait ran out: the load it started at is recorded either way); prints
// each result as a JSON line, writes them all to bench/results/<time>.json, and the medians and ratios as a table
// to bench/RESULTS.md.
// Flags: --rounds N, --lifecycle N, --storm 50,110, --restart 20,110, --relist-pods N, --relist-iterations N,
// --rpc-samples N, --events-pods N, --events-kills N, --multinet N, --dranet N, --hostile-seconds N,
// --density 110,250,500, --density-rounds N, --density-relists N, --density-kills N, --density-idle-seconds N,
// --only lifecycle,rpc,pull,storm,restart,relist,events,density,multinet,dranet,hostile,checkpoint (rpc brings
// the lifecycle with it: the whole pod), --targets minicri,containerd,minicri-runc115,containerd16,floor,
// --reference DIR, --load-wait SECONDS, --cpu-prof, --no-md.
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { execa } from 'execa';
import { hostSnapshot } from '../test/support/leaks.js';
import { ANON_MIB, checkpointBench } from './checkpoint.js';
import { eventsBench } from './events.js';
import { floorBench } from './floor.js';
import { hostileBench } from './hostile.js';
import { densityBench, STEADY_RELISTS } from './density.js';
import { DEBIAN_RUNC, makeBenchEnv, type BenchEnv } from './lib/env.js';
import { DEFAULT_REFERENCE_DIR } from './lib/reference.js';
import { faultCost } from './lib/fault-cost.js';
import { medianOf, table, type Json, type Row } from './lib/report.js';
import { ensurePackages, startTarget, TARGET_NAMES, type Target, type TargetName } from './lib/targets.js';
import { LIFECYCLE_STEPS, lifecycleBench, POD_ONLY_STEPS } from './lifecycle.js';
import { multinetBench, multinetFloor, SECONDARY_COUNTS } from './multinet.js';
import { dranetBench, DRANET_KINDS } from './dranet.js';
import { pullBench } from './pull.js';
import { relistBench, sample, type FootprintSample } from './relist.js';
import { restartBench } from './restart.js';
import { grpcFloorBench, RPC_NAMES, rpcBench } from './rpc.js';
import { stormBench } from './storm.js';

const BENCH_DIR = fileURLToPath(new URL('../../bench/', import.meta.url));
const BENCHES = [
  'lifecycle', 'rpc', 'pull', 'storm', 'restart', 'relist', 'events', 'density', 'multinet', 'dranet', 'hostile', 'checkpoint',
] as const;
/** The benches whose figures depend on runc: the only ones minicri on Debian's runc 1.1.5 runs. */
const RUNC_BENCHES = new Set(['lifecycle', 'rpc', 'storm']);
/** minicri against the reference alone: the density bench's pairs. */
const DENSITY_TARGETS = new Set<TargetName>(['minicri', 'containerd']);
/** containerd leaves secondary networks to a meta-plugin it does not have here and restores behind a setting of its
 * own; the hostile streaming clients are #31's, run against minicri's limits. */
const MINICRI_ONLY = new Set(['multinet', 'dranet', 'hostile', 'checkpoint']);

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    lifecycle: { type: 'string', default: '100' },
    storm: { type: 'string', default: '50,110' },
    restart: { type: 'string', default: '20,110' },
    'rpc-samples': { type: 'string', default: '100' },
    multinet: { type: 'string', default: '20' },
    dranet: { type: 'string', default: '20' },
    'relist-pods': { type: 'string', default: '110' },
    'relist-iterations': { type: 'string', default: '10' },
    'events-pods': { type: 'string', default: '110' },
    'events-kills': { type: 'string', default: '30' },
    'hostile-seconds': { type: 'string', default: '10' },
    density: { type: 'string', default: '110,250,500' },
    'density-rounds': { type: 'string', default: '1' },
    'density-relists': { type: 'string', default: '100' },
    'density-kills': { type: 'string', default: '30' },
    'density-idle-seconds': { type: 'string', default: '30' },
    only: { type: 'string', default: BENCHES.join(',') },
    targets: { type: 'string', default: 'minicri,containerd,minicri-runc115,floor' },
    reference: { type: 'string', default: DEFAULT_REFERENCE_DIR },
    'load-wait': { type: 'string', default: '300' },
    'cpu-prof': { type: 'boolean', default: false },
    'no-md': { type: 'boolean', default: false },
  },
});
const rounds = Number(args.rounds);
const lifecycleN = Number(args.lifecycle);
const stormSizes = args.storm.split(',').filter(Boolean).map(Number);
const restartSizes = args.restart.split(',').filter(Boolean).map(Number);
const rpcSamples = Number(args['rpc-samples']);
const multinetN = Number(args.multinet);
const dranetN = Number(args.dranet);
const relistPods = Number(args['relist-pods']);
const relistIterations = Number(args['relist-iterations']);
const eventsPods = Number(args['events-pods']);
const eventsKills = Number(args['events-kills']);
const hostileSeconds = Number(args['hostile-seconds']);
const densitySizes = args.density.split(',').filter(Boolean).map(Number);
const densityRounds = Number(args['density-rounds']);
const densityOpts = { relists: Number(args['density-relists']), kills: Number(args['density-kills']), idleSeconds: Number(args['density-idle-seconds']) };
const loadWaitSeconds = Number(args['load-wait']);
const only = new Set(args.only.split(','));
// The whole pod is the rpc bench's headline: asking for the RPCs asks for it too.
if (only.has('rpc')) only.add('lifecycle');
const wanted = new Set(args.targets.split(','));
/** The daemons a chosen bench runs on: minicri on runc 1.1.5 only for the runc-bound benches, density only its pair. */
const daemons = TARGET_NAMES.filter((t) => wanted.has(t)).filter((t) => [...only].some((b) =>
  BENCHES.includes(b as (typeof BENCHES)[number]) && (b === 'density' ? DENSITY_TARGETS.has(t) : t !== 'minicri-runc115' || RUNC_BENCHES.has(b))));

const log = (msg: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);

interface Entry { bench: string; target: string; round: number; result: Json }
const entries: Entry[] = [];
function record(bench: string, target: string, round: number, result: unknown): void {
  const entry = { bench, target, round, result: result as Json };
  entries.push(entry);
  console.log(JSON.stringify(entry));
}

async function version(cmd: string, flag = '--version'): Promise<string> {
  const r = await execa(cmd, [flag], { reject: false });
  return String(r.stdout).split('\n')[0] ?? '';
}

/** Load averages (1, 5, 15 min): other work on the machine during the run shows here. */
const load = () => loadavg().map((l) => l.toFixed(1)).join(' ');

/**
 * Waits (at most `loadWaitSeconds`) until the 1-minute load average is under 1; returns the load the caller
 * starts at and how long it waited. The bench's own last round shows in that average for a minute or two.
 */
async function quietMachine(what: string): Promise<{ load1: number; waitedSeconds: number }> {
  const t0 = Date.now();
  while (loadavg()[0]! >= 1 && Date.now() - t0 < loadWaitSeconds * 1000) await new Promise((r) => setTimeout(r, 2000));
  const load1 = Number(loadavg()[0]!.toFixed(2));
  const waitedSeconds = Math.round((Date.now() - t0) / 1000);
  log(`${what}: load ${load1}${load1 >= 1 ? ` after waiting ${waitedSeconds} s, going on` : ''}`);
  return { load1, waitedSeconds };
}

async function machine(loadAtStart: string): Promise<Record<string, string | number>> {
  // A fault's cost decides much of what a pull or a fork costs on this machine (fault-cost.ts).
  const faults = faultCost();
  const cgroup = (await execa('stat', ['-fc', '%T', '/sys/fs/cgroup'], { reject: false })).stdout === 'cgroup2fs' ? 'v2' : 'v1 (hybrid)';
  return {
    cpu: `${cpus().length} x ${cpus()[0]?.model ?? '?'}`,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    kernel: release(),
    cgroup,
    node: process.version,
    'runc (minicri, containerd 2.1.5, the floor)': env ? await version(env.reference.runc) : '',
    'runc (minicri-runc115, containerd 1.6)': await version(DEBIAN_RUNC),
    conmon: await version('conmon'),
    'containerd (reference)': env ? await version(env.reference.containerd) : '',
    'containerd 1.6': await version('containerd'),
    'daemons\' PATH': env?.daemonPath.replaced.length ? `without unpigz (replaced ${env.daemonPath.replaced.join(', ')})` : 'has no unpigz',
    'page faults, fresh / after a fork (µs each)': `${faults.usPerFault.fresh} / ${faults.usPerFault.afterFork}`,
    'load average at start': loadAtStart,
    'load average at end': load(),
  };
}

let env: BenchEnv | undefined;
/** Seconds each bench took, all rounds and targets together (for sizing a run). */
const timings: Record<string, number> = {};

/**
 * The density bench of one round: each size in turn on minicri and the reference, alternating who goes first,
 * after the machine has quietened from the size before.
 */
async function density(e: BenchEnv, order: readonly TargetName[], round: number, logRoot: string): Promise<void> {
  const pair = order.filter((t) => DENSITY_TARGETS.has(t));
  for (const [i, pods] of densitySizes.entries()) {
    record('load', `density${pods}`, round, await quietMachine(`round ${round}: density ${pods}`));
    for (const name of i % 2 ? [...pair].reverse() : pair) {
      notStopping();
      log(`round ${round}: density ${pods} on ${name}`);
      const floor = name === 'minicri' && wanted.has('floor');
      const { floorRelist, ...result } = await densityBench(running.get(name)!, e.busybox, logRoot, { pods, ...densityOpts, floor });
      record(`density${pods}`, name, round, result);
      // Its code warm from the start: the least for both passes.
      if (floorRelist) record(`density${pods}`, 'floor', round, { relist: floorRelist, steadyRelist: floorRelist });
    }
  }
}
const running = new Map<TargetName, Target>();
/** Each daemon just started, with its images pulled and nothing else done yet. */
const fresh = new Map<TargetName, FootprintSample>();

/** The one cleanup under way: a signal during the main loop's own (or the failure path's) waits for it, not a second. */
let cleaning: Promise<void> | undefined;
function cleanup(): Promise<void> {
  cleaning ??= stopAll();
  return cleaning;
}

async function stopAll(): Promise<void> {
  log('cleaning up');
  for (const t of running.values()) await t.stop().catch((err: unknown) => log(`stopping ${t.name}: ${(err as Error).message}`));
  running.clear();
  await env?.cleanup();
  env = undefined;
  log('cleaned up');
}

/** A signal's cleanup is stopping the daemons: the main loop starts nothing more on them. */
function notStopping(): void {
  if (stopping) throw new Error('stopped by a signal');
}

// A listener that stays (not `once`): execa's exit hook re-raises a signal nobody else listens to, which would
// kill the bench halfway through its cleanup.
let stopping = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (stopping) return;
    stopping = true;
    log(`${sig}: stopping`);
    void cleanup().catch((err: unknown) => log(`cleanup: ${(err as Error).stack}`)).finally(() => process.exit(130));
  });
}

async function main(): Promise<void> {
  const before = await hostSnapshot();
  const started = new Date();
  const loadAtStart = load();
  await ensurePackages(log);
  const profDir = join(BENCH_DIR, 'results', 'profiles');
  if (args['cpu-prof']) await mkdir(profDir, { recursive: true });
  env = await makeBenchEnv(log, { referenceDir: args.reference, huge: only.has('pull') });
  const logRoot = join(env.base, 'logs');
  for (const name of daemons) {
    log(`starting ${name}`);
    running.set(name, await startTarget(name, env, { cpuProfDir: args['cpu-prof'] && name === 'minicri' ? profDir : undefined }));
  }
  for (const [name, t] of running) fresh.set(name, await sample(t));
  for (let round = 1; round <= rounds; round++) {
    record('load', 'machine', round, await quietMachine(`round ${round}`));
    // Alternate who goes first, so neither always runs on a warmer (or more fragmented) host.
    const order = round % 2 ? daemons : [...daemons].reverse();
    for (const bench of BENCHES.filter((b) => only.has(b))) {
      notStopping();
      const b0 = Date.now();
      if (bench === 'lifecycle' && wanted.has('floor')) {
        log(`round ${round}: lifecycle x${lifecycleN} on the floor`);
        record('lifecycle', 'floor', round, await floorBench(env, lifecycleN));
      }
      if (bench === 'rpc' && wanted.has('floor')) {
        log(`round ${round}: Version x${rpcSamples} on a bare grpc-js server and on node:http2 alone`);
        record('rpc', 'floor', round, await grpcFloorBench(rpcSamples));
      }
      if (bench === 'multinet' && wanted.has('floor')) {
        log(`round ${round}: multinet x${multinetN} on the floor`);
        record('multinet', 'floor', round, await multinetFloor(env, multinetN));
      }
      if (bench === 'density') {
        if (round <= densityRounds) await density(env, order, round, logRoot);
        timings[bench] = (timings[bench] ?? 0) + (Date.now() - b0) / 1000;
        continue;
      }
      for (const name of order) {
        notStopping();
        const t = running.get(name)!;
        if (MINICRI_ONLY.has(bench) && name !== 'minicri') continue;
        if (name === 'minicri-runc115' && !RUNC_BENCHES.has(bench)) continue;
        log(`round ${round}: ${bench} on ${name}`);
        if (bench === 'lifecycle') record('lifecycle', name, round, await lifecycleBench(t.client, env.busybox, logRoot, lifecycleN));
        if (bench === 'rpc') record('rpc', name, round, await rpcBench(t.client, env.busybox, logRoot, rpcSamples));
        if (bench === 'multinet') record('multinet', name, round, await multinetBench(t.client, logRoot, multinetN));
        if (bench === 'dranet') record('dranet', name, round, await dranetBench(t.client, logRoot, dranetN, env.podResourcesPods));
        if (bench === 'pull') {
          const result: Record<string, unknown> = { big: await pullBench(t, env.big), files: await pullBench(t, env.files) };
          if (env.huge) result.huge = await pullBench(t, env.huge);
          record('pull', name, round, result);
        }
        if (bench === 'storm') for (const n of stormSizes) record(`storm${n}`, name, round, await stormBench(t.client, env.busybox, logRoot, n));
        if (bench === 'restart') for (const n of restartSizes) record(`restart${n}`, name, round, await restartBench(t, env.busybox, logRoot, n));
        if (bench === 'relist') {
          const { relist, footprint } = await relistBench(t, env.busybox, logRoot, relistPods, relistIterations);
          record('relist', name, round, relist);
          record('footprint', name, round, { fresh: fresh.get(name), ...footprint });
        }
        if (bench === 'checkpoint') record('checkpoint', name, round, await checkpointBench(t.client, env.busybox, logRoot, env.checkpointDir));
        if (bench === 'events') record('events', name, round, await eventsBench(t, env.busybox, logRoot, eventsPods, eventsKills));
        if (bench === 'hostile') record('hostile', name, round, await hostileBench(t, env.busybox, logRoot, hostileSeconds));
      }
      timings[bench] = (timings[bench] ?? 0) + (Date.now() - b0) / 1000;
    }
  }
  const mach = await machine(loadAtStart);
  await cleanup();
  const after = await hostSnapshot();
  const leftover = { netns: after.netns.filter((n) => !before.netns.includes(n)), mounts: after.mounts.filter((m) => !before.mounts.includes(m)) };
  if (leftover.netns.length || leftover.mounts.length) log(`warning: the host has new netns or mounts (another user of the machine, or a leak): ${JSON.stringify(leftover)}`);

  const summaries: Record<string, Record<string, Json>> = {};
  for (const { bench, target } of entries) {
    (summaries[bench] ??= {})[target] ??= medianOf(entries.filter((e) => e.bench === bench && e.target === target).map((e) => e.result));
  }
  const stamp = started.toISOString().replace(/[:.]/g, '-');
  const options = { densityRounds, density: densitySizes, ...densityOpts, loadWaitSeconds, reference: args.reference, rounds, lifecycle: lifecycleN, rpcSamples, storm: stormSizes, restart: restartSizes, relistPods, relistIterations, eventsPods, eventsKills, multinet: multinetN, dranet: dranetN, hostileSeconds, only: [...only], targets: [...wanted] };
  await mkdir(join(BENCH_DIR, 'results'), { recursive: true });
  const file = join(BENCH_DIR, 'results', `${stamp}.json`);
  const seconds = Object.fromEntries(Object.entries(timings).map(([k, v]) => [k, Math.round(v)]));
  await writeFile(file, JSON.stringify({ started: started.toISOString(), machine: mach, options, seconds, summaries, entries }, null, 1));
  const md = markdown(started, mach, options, seconds, summaries);
  console.log(md);
  if (!args['no-md']) await writeFile(join(BENCH_DIR, 'RESULTS.md'), md);
  log(`results in ${file}${args['no-md'] ? '' : ' and bench/RESULTS.md'}`);
}

function rows(): Row[] {
  const r: Row[] = [];
  for (const s of LIFECYCLE_STEPS) r.push({ metric: `lifecycle ${s} p50 (ms)`, bench: 'lifecycle', path: `rpc.${s}.p50` });
  for (const p of ['p50', 'p90', 'p99']) r.push({ metric: `lifecycle whole ${p} (ms)`, bench: 'lifecycle', path: `whole.${p}` });
  for (const s of LIFECYCLE_STEPS) r.push({ metric: `lifecycle ${s} p99 (ms)`, bench: 'lifecycle', path: `rpc.${s}.p99` });
  r.push({ metric: 'lifecycle errors (all rounds)', bench: 'lifecycle', path: 'errors' });
  for (const s of POD_ONLY_STEPS) {
    r.push({ metric: `pod with no container: ${s} p50 (ms)`, bench: 'lifecycle', path: `podOnly.rpc.${s}.p50` });
    r.push({ metric: `pod with no container: ${s} p99 (ms)`, bench: 'lifecycle', path: `podOnly.rpc.${s}.p99` });
  }
  r.push({ metric: 'pod with no container: whole p50 (ms)', bench: 'lifecycle', path: 'podOnly.whole.p50' });
  r.push({ metric: 'pod with no container: whole p99 (ms)', bench: 'lifecycle', path: 'podOnly.whole.p99' });
  r.push({ metric: 'pod with no container: errors (all rounds)', bench: 'lifecycle', path: 'podOnly.errors' });
  for (const rpc of [...RPC_NAMES.slice(0, 1), 'Version, bare HTTP/2', ...RPC_NAMES.slice(1)]) {
    r.push({ metric: `rpc ${rpc} p50 (ms)`, bench: 'rpc', path: `rpc.${rpc}.p50` });
    r.push({ metric: `rpc ${rpc} p90 (ms)`, bench: 'rpc', path: `rpc.${rpc}.p90` });
  }
  r.push({ metric: 'rpc errors (all rounds)', bench: 'rpc', path: 'errors' });
  for (const n of stormSizes) {
    r.push({ metric: `storm ${n}: all running (s)`, bench: `storm${n}`, path: 'allRunningSeconds' });
    r.push({ metric: `storm ${n}: per pod p50 (ms)`, bench: `storm${n}`, path: 'perPod.p50' });
    r.push({ metric: `storm ${n}: per pod p99 (ms)`, bench: `storm${n}`, path: 'perPod.p99' });
    r.push({ metric: `storm ${n}: errors (all rounds)`, bench: `storm${n}`, path: 'errors' });
    r.push({ metric: `storm ${n}: teardown (s)`, bench: `storm${n}`, path: 'teardownSeconds' });
  }
  for (const n of restartSizes) {
    r.push({ metric: `restart mid-storm of ${n} pods: first answer after kill -9 (ms)`, bench: `restart${n}`, path: 'firstAnswerMs' });
    r.push({ metric: `restart mid-storm of ${n} pods: first ListPodSandbox answer after kill -9 (ms)`, bench: `restart${n}`, path: 'firstListMs' });
    r.push({ metric: `restart mid-storm of ${n} pods: every pod READY in a relist, after the first answer (s)`, bench: `restart${n}`, path: 'allReadySeconds' });
    r.push({ metric: `restart mid-storm of ${n} pods: pods kubelet made again`, bench: `restart${n}`, path: 'remade' });
    r.push({ metric: `restart mid-storm of ${n} pods: teardown after (s)`, bench: `restart${n}`, path: 'teardownSeconds' });
    r.push({ metric: `restart mid-storm of ${n} pods: errors (all rounds)`, bench: `restart${n}`, path: 'errors' });
  }
  for (const rpc of ['ListPodSandbox', 'ListContainers', 'PodSandboxStatus', 'ContainerStatus']) {
    r.push({ metric: `relist ${relistPods} pods: ${rpc} p50 (ms)`, bench: 'relist', path: `rpc.${rpc}.p50` });
    r.push({ metric: `relist ${relistPods} pods: ${rpc} p99 (ms)`, bench: 'relist', path: `rpc.${rpc}.p99` });
  }
  r.push({ metric: `relist ${relistPods} pods: any call p99 (ms)`, bench: 'relist', path: 'allCalls.p99' });
  r.push({ metric: `relist ${relistPods} pods: whole relist p50 (ms)`, bench: 'relist', path: 'relist.p50' });
  r.push({ metric: 'daemon RSS just started (MiB)', bench: 'footprint', path: 'fresh.daemon.rssKiB', scale: 1024 });
  r.push({ metric: 'daemon CPU just started, idle (% of a core)', bench: 'footprint', path: 'fresh.daemonCpuPercent' });
  r.push({ metric: 'daemon RSS idle after the other benches (MiB)', bench: 'footprint', path: 'idle.daemon.rssKiB', scale: 1024 });
  r.push({ metric: 'daemon CPU idle after the other benches (% of a core)', bench: 'footprint', path: 'idle.daemonCpuPercent' });
  r.push({ metric: `daemon RSS, ${relistPods} pods (MiB)`, bench: 'footprint', path: 'loaded.daemon.rssKiB', scale: 1024 });
  r.push({ metric: `daemon CPU, ${relistPods} pods idle (% of a core)`, bench: 'footprint', path: 'loaded.daemonCpuPercent' });
  r.push({ metric: `helper processes, ${relistPods} pods`, bench: 'footprint', path: 'loaded.helpers.count' });
  r.push({ metric: `helpers PSS, ${relistPods} pods (MiB)`, bench: 'footprint', path: 'loaded.helpers.pssKiB', scale: 1024 });
  r.push({ metric: 'host memory per pod, PSS (KiB)', bench: 'footprint', path: 'perPodPssKiB' });
  r.push({ metric: 'host memory per pod, RSS (KiB)', bench: 'footprint', path: 'perPodRssKiB' });
  r.push({ metric: `events ${eventsPods} pods: STOPPED delivered after kill p50 (ms)`, bench: 'events', path: 'stoppedLatency.p50' });
  r.push({ metric: `events ${eventsPods} pods: STOPPED delivered after kill p99 (ms)`, bench: 'events', path: 'stoppedLatency.p99' });
  r.push({ metric: `events ${eventsPods} pods: daemon CPU idle, one subscriber (% of a core)`, bench: 'events', path: 'idleCpuPercent' });
  r.push({ metric: `events ${eventsPods} pods: daemon CPU idle, no subscriber (% of a core)`, bench: 'events', path: 'idleCpuNoSubscriberPercent' });
  r.push({ metric: `events ${eventsPods} pods: errors (all rounds)`, bench: 'events', path: 'errors' });
  for (const n of densitySizes) {
    const d = `density${n}`;
    r.push({ metric: `density ${n}: all started, 10 at a time (s)`, bench: d, path: 'startAllSeconds' });
    r.push({ metric: `density ${n}: per pod start p50 (ms)`, bench: d, path: 'perPodStart.p50' });
    r.push({ metric: `density ${n}: per pod start p99 (ms)`, bench: d, path: 'perPodStart.p99' });
    r.push({ metric: `density ${n}: relist p50 (ms)`, bench: d, path: 'relist.whole.p50' });
    r.push({ metric: `density ${n}: relist p99 (ms)`, bench: d, path: 'relist.whole.p99' });
    r.push({ metric: `density ${n}: relist after ${STEADY_RELISTS} more relists, p50 (ms)`, bench: d, path: 'steadyRelist.whole.p50' });
    r.push({ metric: `density ${n}: relist after ${STEADY_RELISTS} more relists, p99 (ms)`, bench: d, path: 'steadyRelist.whole.p99' });
    r.push({ metric: `density ${n}: ListPodSandbox + ListContainers p50 (ms)`, bench: d, path: 'relist.lists.p50' });
    r.push({ metric: `density ${n}: pods changed per relist`, bench: d, path: 'relist.changedPerRelist' });
    r.push({ metric: `density ${n}: STOPPED event after a kill p50 (ms)`, bench: d, path: 'events.stoppedLatency.p50' });
    r.push({ metric: `density ${n}: STOPPED event after a kill p99 (ms)`, bench: d, path: 'events.stoppedLatency.p99' });
    r.push({ metric: `density ${n}: daemon CPU idle, one subscriber (% of a core)`, bench: d, path: 'events.idleCpuPercent' });
    r.push({ metric: `density ${n}: daemon RSS (MiB)`, bench: d, path: 'daemon.loaded.rssKiB', scale: 1024 });
    r.push({ metric: `density ${n}: runtime's memory per pod, PSS (KiB)`, bench: d, path: 'perPodPssKiB' });
    r.push({ metric: `density ${n}: runtime's memory per pod, RSS (KiB)`, bench: d, path: 'perPodRssKiB' });
    r.push({ metric: `density ${n}: helper processes (conmon or shims)`, bench: d, path: 'added.helpers' });
    r.push({ metric: `density ${n}: teardown (s)`, bench: d, path: 'teardownSeconds' });
    r.push({ metric: `density ${n}: errors (all rounds)`, bench: d, path: 'errors' });
  }
  for (const count of SECONDARY_COUNTS) r.push({ metric: `RunPodSandbox with ${count} secondary networks p50 (ms)`, bench: 'multinet', path: `run.secondary${count}.p50` });
  r.push({ metric: 'multinet errors (all rounds)', bench: 'multinet', path: 'errors' });
  for (const kind of DRANET_KINDS) r.push({ metric: `RunPodSandbox, one host-device network, ${kind === 'dra' ? 'DRA' : 'device-plugin'} device p50 (ms)`, bench: 'dranet', path: `run.${kind}.p50` });
  r.push({ metric: 'dranet errors (all rounds)', bench: 'dranet', path: 'errors' });
  r.push({ metric: 'hostile streams: Version round trip, idle, p99 (ms)', bench: 'hostile', path: 'idle.p99' });
  r.push({ metric: 'hostile streams: Version round trip during the attack, p50 (ms)', bench: 'hostile', path: 'attack.p50' });
  r.push({ metric: 'hostile streams: Version round trip during the attack, p99 (ms)', bench: 'hostile', path: 'attack.p99' });
  r.push({ metric: 'hostile streams: daemon RSS growth during the attack (MiB)', bench: 'hostile', path: 'rssGrowthMiB' });
  r.push({ metric: 'hostile streams: stdin the floods got out (MiB)', bench: 'hostile', path: 'stdinSentMiB' });
  r.push({ metric: 'hostile streams: 16 MiB frames refused', bench: 'hostile', path: 'framesRefused' });
  r.push({ metric: 'hostile streams: errors (all rounds)', bench: 'hostile', path: 'errors' });
  r.push({ metric: `CheckpointContainer, ${ANON_MIB} MiB anonymous memory (ms)`, bench: 'checkpoint', path: 'checkpointMs' });
  r.push({ metric: `checkpoint archive, ${ANON_MIB} MiB anonymous memory (MiB)`, bench: 'checkpoint', path: 'archiveMiB' });
  r.push({ metric: 'restore: CreateContainer from the archive (ms)', bench: 'checkpoint', path: 'restoreCreateMs' });
  r.push({ metric: 'restore: StartContainer, runc restore (ms)', bench: 'checkpoint', path: 'restoreStartMs' });
  r.push({ metric: `CheckpointPod, one container of ${ANON_MIB} MiB anonymous memory (ms)`, bench: 'checkpoint', path: 'podCheckpointMs' });
  r.push({ metric: 'CheckpointPod: checkpoint directory (MiB)', bench: 'checkpoint', path: 'podCheckpointMiB' });
  r.push({ metric: 'RestorePod: sandbox and container CREATED (ms)', bench: 'checkpoint', path: 'podRestoreMs' });
  r.push({ metric: 'RestorePod: StartContainer, runc restore (ms)', bench: 'checkpoint', path: 'podRestoreStartMs' });
  for (const [image, what] of [['big', '~100 MB image, 4 layers'], ['files', '5 layers of small files'], ['huge', '1 GB image, 8 layers']] as const) {
    r.push({ metric: `pull ${what}, cold (s)`, bench: 'pull', path: `${image}.cold.seconds` });
    r.push({ metric: `pull ${what}, cold (MB/s)`, bench: 'pull', path: `${image}.cold.mbPerSecond` });
    r.push({ metric: `pull ${what}, warm (s)`, bench: 'pull', path: `${image}.warm.seconds` });
    r.push({ metric: `pull ${what}, daemon peak RSS during the cold pull (MiB)`, bench: 'pull', path: `${image}.rssMiB.peak` });
  }
  return r;
}

/** What each target answered to GetContainerEvents, as the events bench recorded it. */
function eventsSupport(summaries: Record<string, Record<string, Json>>): string {
  const said = Object.entries(summaries.events ?? {}).map(([target, r]) => `${target}: ${(r as Record<string, Json>).supported === true ? 'served' : String((r as Record<string, Json>).supported)}`);
  return said.length ? said.join('; ') : 'not run';
}

/** The 1-minute load each round (and each density size) started at, from the recorded entries. */
function loads(): string {
  return entries.filter((e) => e.bench === 'load').map((e) => {
    const l = e.result as { load1: number; waitedSeconds: number };
    return `${e.target === 'machine' ? `round ${e.round}` : `${e.target} (round ${e.round})`} ${l.load1}${l.waitedSeconds ? ` after ${l.waitedSeconds} s` : ''}`;
  }).join('; ') || 'not recorded';
}

function markdown(
  started: Date, mach: Record<string, string | number>, options: object, seconds: Record<string, number>, summaries: Record<string, Record<string, Json>>,
): string {
  const present = rows().filter((r) => summaries[r.bench]);
  return `# minicri benchmark results

Produced by \`npm run bench\` (bench/run.ts) on ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC.
Every figure is the median over ${rounds} round(s) (density: ${densityRounds}); within a round the targets
alternate. The reference is containerd 2.1.5 on runc 1.3.6 (\`../shared/containerd-2.1\`): every ratio is
against it, and minicri runs on the same runc 1.3.6; "minicri, runc 1.1.5" is minicri on Debian's runc, and
"containerd 1.6" Debian's containerd, both reported only. Error rows count errors over all rounds. Lower is better except MB/s. "floor" is the same lifecycle done directly with
ip netns, the bridge CNI plugin, mount and runc (see bench/floor.ts), the least work each RPC must do; for
\`rpc Version\` it is a bare grpc-js server with no work in its handler (bench/grpc-floor-server.ts), what
any Node CRI server pays per call, and \`rpc Version, bare HTTP/2\` node:http2 alone sending a ready-made reply:
what is left without grpc-js. For the density relists it is a bare grpc-js server answering the relist's calls
with minicri's own replies of that size as it encoded them, warmed first with ${STEADY_RELISTS} relists, and given in both relist rows.

Machine: ${Object.entries(mach).map(([k, v]) => `${k} ${v}`).join('; ')}.

Options: \`${JSON.stringify(options)}\`

1-minute load average each started at (the bench waits up to ${loadWaitSeconds} s for it to fall under 1): ${loads()}.

Seconds each bench took, all rounds and targets: ${Object.entries(seconds).map(([k, v]) => `${k} ${v}`).join(', ')}.

${table(present, summaries, [...wanted])}

Reading it:
- containerd runs \`runc create\` in StartContainer, minicri (and the floor) in CreateContainer: compare
  CreateContainer + StartContainer, or the whole lifecycle, rather than each alone.
- StopContainer uses the image's stop signal, SIGKILL for the bench image, so it measures the stop and not a grace period.
- Whole pod: RunPodSandbox, CreateContainer, StartContainer, StopContainer, RemoveContainer, StopPodSandbox,
  RemovePodSandbox of one pod with one container; "pod with no container" is cri-tools' pod benchmark (Run, Stop,
  Remove), so StopPodSandbox shows both with its container gone before and with none ever.
- Density: pods made 10 at a time; the relist is kubelet's generic PLEG after one pod changed (ListPodSandbox,
  ListContainers, and the status calls of the pods that changed); the runtime's memory per pod is the daemon's
  growth plus conmon (minicri, one per container and per pause) or the shim (containerd, one per pod), plus the
  pause, over the pods. "After ${STEADY_RELISTS} more relists" is the same ${densityOpts.relists} changed relists timed again
  after ${STEADY_RELISTS} untimed ones, the daemon's code as V8 has optimized it by then (at 110 pods that pass runs out of running containers to
  stop: its changes are mostly removes; the results' \`changes\` say which).
- Pull peak RSS is VmRSS of the daemon and its helper processes read every 25 ms during the cold pull.
- Host memory per pod is the daemon's PSS growth from idle to ${relistPods} pods plus the PSS of its helper processes
  (conmon for each pause and container, and the one mount helper, with minicri; one runc shim per pod with containerd), over the pods.
- Events: a target whose STOPPED rows are empty does not serve GetContainerEvents (${eventsSupport(summaries)}); its
  "one subscriber" CPU is then with none as well.
- Hostile streams (minicri only): the event loop's delay is read from outside, as the Version round trip during the
  attack (two SPDY and one WebSocket stdin flood into a process that never reads, port-forward sessions each sending
  a 16 MiB SPDY frame, a port-forward session opening pairs without end; bench/hostile.ts) against the same idle.
- Tails (p99) on a 2-core VM that runs anything else are noisy; the p50s are the figures to hold against each other.
`;
}

try {
  await main();
} catch (err) {
  if (stopping) {
    // What failed is the bench a signal cut short: the signal's cleanup, already under way, ends the process.
    await cleanup().catch(() => undefined);
  } else {
    log(`failed: ${(err as Error).stack ?? String(err)}`);
    await cleanup().catch((e: unknown) => log(`cleanup: ${(e as Error).message}`));
    process.exitCode = 1;
  }
}
