// density: P pods of one container each (the bench's pause and busybox, both present), made 10 at a time as
// kubelet's pod workers make them. With them running: the time to start them all; the daemon's memory and what
// the runtime adds per pod (minicri: a conmon per container and per pause, and the pause; containerd: a shim per
// pod and the pause), in PSS and RSS; the evented case (one GetContainerEvents subscriber: the daemon's idle CPU,
// and the delay from a container's SIGKILL from outside to its STOPPED event); and kubelet's generic relist
// (ListPodSandbox, ListContainers, then PodSandboxStatus and ContainerStatus of each pod that changed), sampled
// after one pod changed each time (its container stopped, or removed once stopped). Everything goes after.
// With the floor among the targets, the same relists are then timed against a bare grpc-js server answering
// with minicri's replies (relistFloor): what Node and grpc-js alone take for them.
import { pool } from '../core/locks.js';
import { stoppedLatencies, subscribe } from './events.js';
import { benchContainer, benchPod } from './lib/pods.js';
import { cpuPercent, memoryOf, sumMemory, type Memory } from './lib/proc.js';
import { drain, type Target } from './lib/targets.js';
import { now, round, since, summarize, type Summary } from './lib/stats.js';
import { changedPods, snapshotOf, type RelistSnapshot } from './relist.js';
import { KUBELET_POD_WORKERS } from './restart.js';
import { liveProcesses } from '../oci/runtime/processes.js';
import { withFloorServer } from './lib/floor-server.js';

/** After the pods are made: V8 and Go collect some seconds after a burst of work, which is the burst's cost. */
const SETTLE_MS = 10_000;

export interface DensityOptions {
  pods: number;
  /** Relists timed. */
  relists: number;
  /** Containers killed from outside for the event delay. */
  kills: number;
  /** Seconds the idle CPU is read over. */
  idleSeconds: number;
  /** Whether to time the relists against the floor too (relistFloor), with this daemon's replies. */
  floor?: boolean;
}

export interface DensityResult {
  pods: number;
  /** Seconds from the first RunPodSandbox to the last StartContainer's answer. */
  startAllSeconds: number;
  /** Milliseconds from a pod's RunPodSandbox to its StartContainer's answer. */
  perPodStart: Summary;
  daemon: { idle: Memory; loaded: Memory };
  /** The runtime's processes besides the daemon: conmon or shims, and the pauses. */
  added: { helpers: number; pauses: number } & Memory;
  /** KiB per pod: the daemon's growth plus `added`, over the pods. */
  perPodPssKiB: number;
  perPodRssKiB: number;
  events: { supported: boolean | string; idleCpuPercent: number; stoppedLatency: Summary };
  relist: { whole: Summary; lists: Summary; statusCalls: Summary; changedPerRelist: number; changes?: Changes };
  /** The same relists after STEADY_RELISTS more. */
  steadyRelist: DensityResult['relist'];
  /** With `floor`: the relists against the floor (relistFloor), answering with this daemon's replies. */
  floorRelist?: DensityResult['relist'] | undefined;
  teardownSeconds: number;
  /** Seconds each step of the bench took, for sizing a run. */
  stepSeconds: Record<string, number>;
  errors: string[];
}

/** The pauses: children of the runtime's helper processes (conmon or the shim reaps its pod's processes). */
async function pausesOf(helpers: number[]): Promise<number[]> {
  const parents = new Set(helpers);
  return (await liveProcesses('pause')).filter((p) => parents.has(p.ppid)).map((p) => p.pid);
}

export async function densityBench(target: Target, image: string, logRoot: string, opts: DensityOptions): Promise<DensityResult> {
  const rt = target.client.runtime;
  const errors: string[] = [];
  const idle = await memoryOf(target.pid);
  const containers: Array<{ pod: string; id: string }> = [];
  const perPod: number[] = [];
  try {
    const t0 = now();
    await pool(Array.from({ length: opts.pods }), KUBELET_POD_WORKERS, async () => {
      const p0 = now();
      try {
        const config = benchPod('density', logRoot);
        const { pod_sandbox_id: pod } = await rt.call('RunPodSandbox', { config }, { timeoutMs: 300_000 });
        const create = { pod_sandbox_id: pod, config: benchContainer('app', image), sandbox_config: config };
        const { container_id: id } = await rt.call('CreateContainer', create, { timeoutMs: 300_000 });
        await rt.call('StartContainer', { container_id: id }, { timeoutMs: 300_000 });
        containers.push({ pod, id });
        perPod.push(since(p0));
      } catch (err) {
        errors.push((err as Error).message);
      }
    });
    const startAllSeconds = round(since(t0) / 1000);
    await new Promise((r) => setTimeout(r, SETTLE_MS));

    const helpers = await target.helpers();
    const pauses = await pausesOf(helpers);
    const [loaded, addedMem] = await Promise.all([memoryOf(target.pid), sumMemory([...helpers, ...pauses])]);
    const per = (k: keyof Memory) => round((loaded[k] - idle[k] + addedMem[k]) / opts.pods, 1);

    const e0 = now();
    const events = await evented(target, containers.slice(0, opts.kills).map((c) => c.id), opts.idleSeconds, errors);
    const r0 = now();
    const { relist, steady, replies } = await relists(target, containers, opts.relists, errors, opts.floor === true);
    // With the pods still running, as the daemon was timed.
    const floorRelist = replies && await relistFloor(replies, opts.relists);
    const d0 = now();
    await drain(target.client, KUBELET_POD_WORKERS);
    const stepSeconds = { start: startAllSeconds, evented: round(Number(r0 - e0) / 1e9), relist: round(Number(d0 - r0) / 1e9), teardown: round(since(d0) / 1000) };
    return {
      pods: opts.pods, startAllSeconds, perPodStart: summarize(perPod),
      daemon: { idle, loaded }, added: { helpers: helpers.length, pauses: pauses.length, ...addedMem },
      perPodPssKiB: per('pssKiB'), perPodRssKiB: per('rssKiB'),
      events, relist, steadyRelist: steady, floorRelist, teardownSeconds: stepSeconds.teardown, stepSeconds, errors,
    };
  } catch (err) {
    await drain(target.client, KUBELET_POD_WORKERS).catch(() => undefined);
    throw err;
  }
}

/** One subscriber: the daemon's CPU while the pods idle, then each of `kill` SIGKILLed and its STOPPED event awaited. */
async function evented(target: Target, kill: string[], idleSeconds: number, errors: string[]): Promise<DensityResult['events']> {
  const sub = await subscribe(target);
  try {
    const idleCpuPercent = round(await cpuPercent(target.pid, idleSeconds * 1000), 2);
    if (sub.ended) return { supported: `GetContainerEvents: ${sub.ended.code} ${sub.ended.details}`, idleCpuPercent, stoppedLatency: summarize([]) };
    const latencies = await stoppedLatencies(target, sub, kill, errors);
    return { supported: true, idleCpuPercent, stoppedLatency: summarize(latencies) };
  } finally {
    sub.cancel();
  }
}

type Runtime = Target['client']['runtime'];
/** The pods a relist asks the status of, each with its containers. */
type StatusCalls = Array<{ pod: string; containers: string[] }>;
/** What the relist's two lists answered. */
type Lists = Parameters<typeof snapshotOf>;

/**
 * One relist as kubelet's generic PLEG makes it, timed into `into`: both lists at once, then PodSandboxStatus
 * and ContainerStatus of each pod `changed` picks from what the lists said.
 */
async function relistOnce(
  rt: Runtime, into: Record<string, number[]>,
  changed: (...lists: Lists) => StatusCalls,
): Promise<number> {
  const t0 = now();
  const [{ items }, { containers: listed }] = await Promise.all([rt.call('ListPodSandbox', {}), rt.call('ListContainers', {})]);
  (into.lists ??= []).push(since(t0));
  const calls = changed(items, listed);
  const s0 = now();
  for (const { pod, containers } of calls) {
    await rt.call('PodSandboxStatus', { pod_sandbox_id: pod });
    for (const id of containers) await rt.call('ContainerStatus', { container_id: id });
  }
  (into.statusCalls ??= []).push(since(s0));
  (into.whole ??= []).push(since(t0));
  return calls.length;
}

/** What the changes before a pass's relists were: containers stopped, removed, and turns with none left to change. */
interface Changes { stops: number; removes: number; none: number }

const relistSummary = (times: Record<string, number[]>, changedTotal: number, n: number, changes?: Changes): DensityResult['relist'] => ({
  whole: summarize(times.whole ?? []), lists: summarize(times.lists ?? []), statusCalls: summarize(times.statusCalls ?? []),
  changedPerRelist: round(changedTotal / Math.max(1, n), 2), ...(changes && { changes }),
});

/** Relists made untimed between the two timed passes: kubelet's relist each second over a node's first ~17 minutes. */
export const STEADY_RELISTS = 1000;

/**
 * `n` timed relists (after an untimed one), each after one pod changed: as many of them as there are containers
 * not running (the evented bench's kills) remove a stopped container, the oldest first, and the rest stop a
 * running one, in turn (each kind stands in for the other when it runs out). The status calls are those kubelet
 * makes for the pods that changed. Then STEADY_RELISTS more untimed, and a second pass of `n` timed, changed the
 * same way (`steady`): the daemon's code as V8 has it after minutes of relisting, not just after the pods were
 * made. With `floor`, the replies to a relist's calls after the first pass are kept for the floor.
 */
async function relists(
  target: Target, containers: Array<{ pod: string; id: string }>, n: number, errors: string[], floor: boolean,
): Promise<{ relist: DensityResult['relist']; steady: DensityResult['relist']; replies?: Record<string, Buffer> }> {
  const rt = target.client.runtime;
  let prev: RelistSnapshot | undefined;
  const changed = (...[items, listed]: Lists): StatusCalls => {
    const next = snapshotOf(items, listed);
    const pods = changedPods(prev, next);
    prev = next;
    return pods.map((pod) => ({ pod, containers: [...next.containers].filter(([, c]) => c.pod === pod).map(([id]) => id) }));
  };
  await relistOnce(rt, {}, changed);
  const stateOf = (id: string) => prev!.containers.get(id)?.state;
  const running = containers.filter((c) => stateOf(c.id) === 'CONTAINER_RUNNING').map((c) => c.id);
  const stopped = containers.filter((c) => stateOf(c.id) !== undefined && stateOf(c.id) !== 'CONTAINER_RUNNING').map((c) => c.id);
  const removesPerPass = stopped.length;
  const change = async (i: number, counts: Changes) => {
    const remove = (i < removesPerPass && stopped.length > 0) || running.length === 0;
    const id = remove ? stopped.shift() : running.shift();
    if (!id) {
      counts.none++;
      return;
    }
    try {
      if (remove) await rt.call('RemoveContainer', { container_id: id });
      else {
        await rt.call('StopContainer', { container_id: id, timeout: '10' });
        stopped.push(id);
      }
      counts[remove ? 'removes' : 'stops']++;
    } catch (err) {
      errors.push(`changing ${id}: ${(err as Error).message}`);
    }
  };
  const timedPass = async () => {
    const times: Record<string, number[]> = {};
    const counts: Changes = { stops: 0, removes: 0, none: 0 };
    let changedTotal = 0;
    for (let i = 0; i < n; i++) {
      await change(i, counts);
      changedTotal += await relistOnce(rt, times, changed);
    }
    return relistSummary(times, changedTotal, n, counts);
  };
  const relist = await timedPass();
  // Kept before the second pass, which can leave no container at the smallest size.
  const replies = floor ? await repliesFor(rt, prev!, errors) : undefined;
  for (let i = 0; i < STEADY_RELISTS; i++) await relistOnce(rt, {}, changed);
  const steady = await timedPass();
  return { relist, steady, ...(replies && { replies }) };
}

/** The replies to a relist's calls, of a container the changes stopped when there is one, for the floor. */
async function repliesFor(rt: Runtime, now: RelistSnapshot, errors: string[]): Promise<Record<string, Buffer> | undefined> {
  const listed = [...now.containers];
  const [id, c] = listed.find(([, l]) => l.state === 'CONTAINER_EXITED') ?? listed[0] ?? [];
  if (!id || !c) {
    errors.push('no container is left: the floor has no replies to answer with');
    return undefined;
  }
  return {
    ListPodSandbox: await rt.raw('ListPodSandbox', {}),
    ListContainers: await rt.raw('ListContainers', {}),
    PodSandboxStatus: await rt.raw('PodSandboxStatus', { pod_sandbox_id: c.pod }),
    ContainerStatus: await rt.raw('ContainerStatus', { container_id: id }),
  };
}

/**
 * The relist's floor: the same relists against a bare grpc-js server (bench/grpc-floor-server.ts, the daemon's
 * node flags) that answers with the daemon's own replies, one pod's status calls each time. In place of the
 * change, the two round trips the daemon's loop makes at least (a status, then a Version for the stop or removal).
 * It is first warmed with STEADY_RELISTS relists: the least Node and grpc-js take, their code optimized.
 */
export async function relistFloor(replies: Record<string, Buffer>, n: number): Promise<DensityResult['relist']> {
  const times: Record<string, number[]> = {};
  // The floor answers any id with the reply it holds.
  const calls: StatusCalls = [{ pod: 'floor', containers: ['floor'] }];
  await withFloorServer({ replay: replies }, async (client) => {
    const rt = client.runtime;
    for (let i = 0; i < STEADY_RELISTS; i++) await relistOnce(rt, {}, () => calls);
    for (let i = 0; i < n; i++) {
      await rt.call('ContainerStatus', { container_id: 'floor' });
      await rt.call('Version', {});
      await relistOnce(rt, times, () => calls);
    }
  });
  return relistSummary(times, n, n);
}
