// density: P pods of one container each (the bench's pause and busybox, both present), made 10 at a time as
// kubelet's pod workers make them. With them running: the time to start them all; the daemon's memory and what
// the runtime adds per pod (minicri: a conmon per container and per pause, and the pause; containerd: a shim per
// pod and the pause), in PSS and RSS; the evented case (one GetContainerEvents subscriber: the daemon's idle CPU,
// and the delay from a container's SIGKILL from outside to its STOPPED event); and kubelet's generic relist
// (ListPodSandbox, ListContainers, then PodSandboxStatus and ContainerStatus of each pod that changed), sampled
// after one pod changed each time (its container stopped, or removed once stopped). Everything goes after.
// With the floor among the targets, the same relists are then timed against a bare grpc-js server answering
// with minicri's replies (relistFloor): what Node and grpc-js alone take for them.
import type * as grpc from '@grpc/grpc-js';
import { pool } from '../core/locks.js';
import { stoppedLatencies, subscribe } from './events.js';
import { benchContainer, benchPod } from './lib/pods.js';
import { cpuPercent, memoryOf, sumMemory, type Memory } from './lib/proc.js';
import { drain, type Target } from './lib/targets.js';
import { now, round, since, summarize, type Summary } from './lib/stats.js';
import { changedPods, snapshotOf, type RelistSnapshot } from './relist.js';
import { KUBELET_POD_WORKERS } from './restart.js';
import { liveProcesses } from '../oci/runtime/processes.js';
import { loadCri } from '../server/proto.js';
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
  /** Whether to keep the replies of a relist for the floor (relistFloor). */
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
  relist: { whole: Summary; lists: Summary; statusCalls: Summary; changedPerRelist: number };
  /** The same relists after STEADY_RELISTS more. */
  steadyRelist: DensityResult['relist'];
  /** With `floor`: one relist's replies, as the daemon encoded them. */
  replies?: Record<string, Buffer>;
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
    const d0 = now();
    await drain(target.client, KUBELET_POD_WORKERS);
    const stepSeconds = { start: startAllSeconds, evented: round(Number(r0 - e0) / 1e9), relist: round(Number(d0 - r0) / 1e9), teardown: round(since(d0) / 1000) };
    return {
      pods: opts.pods, startAllSeconds, perPodStart: summarize(perPod),
      daemon: { idle, loaded }, added: { helpers: helpers.length, pauses: pauses.length, ...addedMem },
      perPodPssKiB: per('pssKiB'), perPodRssKiB: per('rssKiB'),
      events, relist, steadyRelist: steady, replies, teardownSeconds: stepSeconds.teardown, stepSeconds, errors,
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

const relistSummary = (times: Record<string, number[]>, changedTotal: number, n: number): DensityResult['relist'] => ({
  whole: summarize(times.whole ?? []), lists: summarize(times.lists ?? []), statusCalls: summarize(times.statusCalls ?? []),
  changedPerRelist: round(changedTotal / Math.max(1, n), 2),
});

/** Relists made untimed between the two timed passes: kubelet's relist each second over a node's first ~17 minutes. */
export const STEADY_RELISTS = 1000;

/**
 * `n` timed relists (after an untimed one), each after one pod changed: the next container in turn stopped,
 * or removed when it had stopped already. The status calls are those kubelet makes for the pods that changed.
 * Then STEADY_RELISTS more untimed, and `n` timed again as before (`steady`): the daemon's code as V8 has it
 * after minutes of relisting, not just after the pods were made. With `floor`, the replies of the last relist
 * are kept for the floor to answer with.
 */
async function relists(
  target: Target, containers: Array<{ pod: string; id: string }>, n: number, errors: string[], floor: boolean,
): Promise<{ relist: DensityResult['relist']; steady: DensityResult['relist']; replies?: Record<string, Buffer> }> {
  const rt = target.client.runtime;
  let prev: RelistSnapshot | undefined;
  let last: StatusCalls = [];
  const changed = (...[items, listed]: Lists): StatusCalls => {
    const next = snapshotOf(items, listed);
    const pods = changedPods(prev, next);
    prev = next;
    last = pods.map((pod) => ({ pod, containers: [...next.containers].filter(([, c]) => c.pod === pod).map(([id]) => id) }));
    return last;
  };
  const removed = new Set<string>();
  let turn = 0;
  const change = async () => {
    for (let tried = 0; tried < containers.length; tried++) {
      const c = containers[turn++ % containers.length]!;
      if (removed.has(c.id)) continue;
      try {
        const state = (await rt.call('ContainerStatus', { container_id: c.id })).status?.state;
        if (state === 'CONTAINER_RUNNING') await rt.call('StopContainer', { container_id: c.id, timeout: '10' });
        else {
          await rt.call('RemoveContainer', { container_id: c.id });
          removed.add(c.id);
        }
      } catch (err) {
        errors.push(`changing ${c.id}: ${(err as Error).message}`);
      }
      return;
    }
  };
  const timedPass = async () => {
    const times: Record<string, number[]> = {};
    let changedTotal = 0;
    for (let i = 0; i < n && containers.length; i++) {
      await change();
      changedTotal += await relistOnce(rt, times, changed);
    }
    return relistSummary(times, changedTotal, n);
  };
  await relistOnce(rt, {}, changed);
  const relist = await timedPass();
  for (let i = 0; i < STEADY_RELISTS; i++) await relistOnce(rt, {}, changed);
  const steady = await timedPass();
  const pod = last[0];
  if (!floor || !pod?.containers[0]) return { relist, steady };
  const methods = loadCri().RuntimeService.service;
  const reply = async (method: 'ListPodSandbox' | 'ListContainers' | 'PodSandboxStatus' | 'ContainerStatus', request: object) =>
    (methods[method] as grpc.MethodDefinition<object, object>).responseSerialize(await rt.call(method, request as never));
  const replies = {
    ListPodSandbox: await reply('ListPodSandbox', {}),
    ListContainers: await reply('ListContainers', {}),
    PodSandboxStatus: await reply('PodSandboxStatus', { pod_sandbox_id: pod.pod }),
    ContainerStatus: await reply('ContainerStatus', { container_id: pod.containers[0] }),
  };
  return { relist, steady, replies };
}

/**
 * The relist's floor: the same relists against a bare grpc-js server (bench/grpc-floor-server.ts, the daemon's
 * node flags) that answers with the daemon's own replies, one pod's status calls each time. In place of the
 * change, the two round trips the daemon's loop makes (ContainerStatus, then a Version for the stop). It is
 * first warmed with as many relists as there are pods, about the calls the daemon answered making them.
 */
export async function relistFloor(replies: Record<string, Buffer>, pods: number, n: number): Promise<DensityResult['relist']> {
  const times: Record<string, number[]> = {};
  // The floor answers any id with the reply it holds.
  const calls: StatusCalls = [{ pod: 'floor', containers: ['floor'] }];
  await withFloorServer({ replay: replies }, async (client) => {
    const rt = client.runtime;
    for (let i = 0; i < pods; i++) await relistOnce(rt, {}, () => calls);
    for (let i = 0; i < n; i++) {
      await rt.call('ContainerStatus', { container_id: 'floor' });
      await rt.call('Version', {});
      await relistOnce(rt, times, () => calls);
    }
  });
  return relistSummary(times, n, n);
}
