// Evented relist: kubelet with evented PLEG relists rarely and mostly reads GetContainerEvents. With P pods of
// one container each and one subscriber, the daemon's CPU while the pods idle, and the delivery latency of
// STOPPED events: from a container's kill from outside (SIGKILL to its process) to its STOPPED event at the
// subscriber. A runtime that does not serve GetContainerEvents (containerd before 1.7) says so, and only its
// idle CPU is measured (its subscription ended at once: it is the figure without one).
import * as grpc from '@grpc/grpc-js';
import { pool } from '../core/locks.js';
import type { ContainerEventResponse__Output } from '../gen/runtime/v1/ContainerEventResponse.js';
import { benchContainer, benchPod } from './lib/pods.js';
import { cpuPercent } from './lib/proc.js';
import { round, summarize, type Summary } from './lib/stats.js';
import { drain, type Target } from './lib/targets.js';

/**
 * Long enough that a 100 Hz tick count resolves a tenth of a percent, and that minicri's background CNI CHECK
 * (one pod every 30 s) is in it as often as it is in any stretch of idle time.
 */
const CPU_WINDOW_MS = 30_000;
const SETUP_CONCURRENCY = 4;
const SETTLE_MS = 15_000;
/** A STOPPED event later than this is counted as missing: the figure would be meaningless anyway. */
const EVENT_WAIT_MS = 10_000;

export interface EventsResult {
  pods: number;
  /** Whether the runtime serves GetContainerEvents; when not, why (its status). */
  supported: boolean | string;
  /** Percent of one core the daemon used over CPU_WINDOW_MS with the pods idle and one subscriber. */
  idleCpuPercent: number;
  /** The same before anyone subscribed: what subscribing costs while nothing changes. */
  idleCpuNoSubscriberPercent: number;
  /** Events the subscriber got while the pods idled: none, as nothing changed. */
  eventsWhileIdle?: number;
  /** Milliseconds from SIGKILL of a container's process to its STOPPED event at the subscriber. */
  stoppedLatency?: Summary;
  errors: string[];
}

export interface Subscription {
  /** The status it ended with, if it did. */
  ended: grpc.StatusObject | undefined;
  /** How many events it got. */
  received: number;
  /** Resolves with the time (performance.now()) the next STOPPED event of `id` arrives. */
  stopped(id: string): Promise<number>;
  cancel(): void;
}

/** Subscribes; resolves once the stream is in place (its headers) or has ended (a runtime that does not serve it). */
export async function subscribe(target: Target): Promise<Subscription> {
  type Events = grpc.ClientReadableStream<ContainerEventResponse__Output>;
  const call = target.client.runtime.stream('GetContainerEvents', {}) as unknown as Events;
  const waiting = new Map<string, (at: number) => void>();
  const sub: Subscription = {
    ended: undefined,
    received: 0,
    stopped: (id) => new Promise((resolve) => waiting.set(id, resolve)),
    cancel: () => call.cancel(),
  };
  call.on('data', (e: ContainerEventResponse__Output) => {
    sub.received++;
    if (e.container_event_type !== 'CONTAINER_STOPPED_EVENT') return;
    const at = performance.now();
    waiting.get(e.container_id)?.(at);
    waiting.delete(e.container_id);
  });
  call.on('error', () => undefined); // the status says it
  await new Promise<void>((resolve) => {
    call.once('metadata', () => resolve());
    call.on('status', (s: grpc.StatusObject) => { sub.ended = s; resolve(); });
  });
  return sub;
}

/** The pid of a container's process, from ContainerStatus' verbose info (minicri and containerd both give "pid"). */
export async function pidOf(target: Target, id: string): Promise<number> {
  const info = (await target.client.runtime.call('ContainerStatus', { container_id: id, verbose: true })).info.info ?? '{}';
  return (JSON.parse(info) as { pid?: number }).pid ?? 0;
}

/**
 * SIGKILLs each container's process from outside, one after the other, and waits for its STOPPED event:
 * the milliseconds from each kill to its event. Stops early if the stream ends; misses go to `errors`.
 */
export async function stoppedLatencies(target: Target, sub: Subscription, ids: string[], errors: string[]): Promise<number[]> {
  const latencies: number[] = [];
  for (const id of ids) {
    const pid = await pidOf(target, id);
    if (!pid) { errors.push(`no pid for container ${id}`); continue; }
    const arrived = sub.stopped(id);
    const killedAt = performance.now();
    process.kill(pid, 'SIGKILL');
    const at = await Promise.race([arrived, new Promise<undefined>((r) => setTimeout(() => r(undefined), EVENT_WAIT_MS))]);
    if (at === undefined) errors.push(`no STOPPED event for ${id} within ${EVENT_WAIT_MS} ms`);
    else latencies.push(at - killedAt);
    if (sub.ended) { errors.push(`the event stream ended: ${grpc.status[sub.ended.code]} ${sub.ended.details}`); break; }
  }
  return latencies;
}

export async function eventsBench(target: Target, image: string, logRoot: string, pods: number, kills: number): Promise<EventsResult> {
  const rt = target.client.runtime;
  const errors: string[] = [];
  const containers: string[] = [];
  try {
    await pool(Array.from({ length: pods }), SETUP_CONCURRENCY, async () => {
      const config = benchPod('events', logRoot);
      const { pod_sandbox_id: pod } = await rt.call('RunPodSandbox', { config }, { timeoutMs: 300_000 });
      const create = { pod_sandbox_id: pod, config: benchContainer('app', image), sandbox_config: config };
      const { container_id: id } = await rt.call('CreateContainer', create, { timeoutMs: 300_000 });
      await rt.call('StartContainer', { container_id: id }, { timeoutMs: 300_000 });
      containers.push(id);
    });
    // Settle after the setup (V8 collects and shrinks its heap some seconds after a burst of work ends: that is
    // the setup's cost, not idling's), then the idle figures, without and with a subscriber.
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const idleCpuNoSubscriberPercent = round(await cpuPercent(target.pid, CPU_WINDOW_MS), 2);
    const sub = await subscribe(target);
    const supported = sub.ended ? `GetContainerEvents: ${grpc.status[sub.ended.code]} ${sub.ended.details}` : true;
    try {
      const idleCpuPercent = round(await cpuPercent(target.pid, CPU_WINDOW_MS), 2);
      if (supported !== true) return { pods, supported, idleCpuPercent, idleCpuNoSubscriberPercent, errors };
      const eventsWhileIdle = sub.received;
      const latencies = await stoppedLatencies(target, sub, containers.slice(0, kills), errors);
      return { pods, supported, idleCpuPercent, idleCpuNoSubscriberPercent, eventsWhileIdle, stoppedLatency: summarize(latencies), errors };
    } finally {
      sub.cancel();
    }
  } finally {
    await drain(target.client);
  }
}
