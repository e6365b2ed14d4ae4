// Container events (evented PLEG) through the real daemon: a subscriber sees a pod's whole lifecycle in order
// with the statuses ContainerStatus gives; an exit from outside (kill -9) arrives as STOPPED with its code; two
// subscribers get the same; one that stops reading is cut off past container_events_buffer while the others go
// on and the daemon's memory stays put; a restart ends the stream with a status. PodSandboxStatus carries the
// containers' statuses and a timestamp, and the Stream* lists end with OK.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { ContainerEventResponse__Output } from '../../../gen/runtime/v1/ContainerEventResponse.js';
import { idleServerStream } from '../../support/idle-grpc-stream.js';
import { rssBytes } from '../../support/rss.js';
import { ContainerEnv } from './env.js';

/** Events a subscriber has got so far, and how its stream ended (once it has). */
interface Subscriber {
  events: ContainerEventResponse__Output[];
  ended: Promise<grpc.StatusObject>;
  /** Resolves with the first `n` events of `sandboxId`'s pod, or fails naming what came, after `ms`. */
  eventsOf(sandboxId: string, n: number, ms?: number): Promise<ContainerEventResponse__Output[]>;
  cancel(): void;
}

/** Subscribes, and resolves once the daemon says the subscription is in place (its response headers). */
async function subscribe(env: ContainerEnv): Promise<Subscriber> {
  const call = env.rt.runtime.stream('GetContainerEvents', {}) as unknown as grpc.ClientReadableStream<ContainerEventResponse__Output>;
  const events: ContainerEventResponse__Output[] = [];
  call.on('data', (e: ContainerEventResponse__Output) => events.push(e));
  call.on('error', () => undefined); // `ended` says it
  const ended = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
  await new Promise<void>((resolve, reject) => {
    call.once('metadata', () => resolve());
    void ended.then((s) => reject(new Error(`the event stream ended before it was in place: ${grpc.status[s.code]} ${s.details}`)));
  });
  const of = (id: string) => events.filter((e) => e.pod_sandbox_status?.id === id);
  return {
    events, ended, cancel: () => call.cancel(),
    async eventsOf(id, n, ms = 30_000) {
      const deadline = Date.now() + ms;
      while (of(id).length < n) {
        if (Date.now() > deadline) assert.fail(`expected ${n} events of pod ${id.slice(0, 12)} within ${ms} ms, got: ${of(id).map(short).join(', ')}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      return of(id).slice(0, n);
    },
  };
}

const short = (e: ContainerEventResponse__Output) => `${e.container_event_type.replace(/^CONTAINER_|_EVENT$/g, '')} ${e.container_id.slice(0, 6)}`;


describe('container events', { timeout: 300_000 }, () => {
  let env: ContainerEnv;
  before(async () => { env = await ContainerEnv.start(78, 'container_events_buffer = 8'); });
  after(() => env.stop());

  it('gives each subscriber a pod\'s lifecycle in order, a kill from outside as STOPPED with its code, with the statuses ContainerStatus gives', async (t) => {
    const [a, b] = [await subscribe(env), await subscribe(env)];
    t.after(() => { a.cancel(); b.cancel(); });
    const pod = await env.runPod(t, 'events');
    const c = await env.run(pod, 'sleeper', ['sleep', '1000']);
    const pid = (JSON.parse((await env.rt.runtime.call('ContainerStatus', { container_id: c, verbose: true })).info.info!) as { pid: number }).pid;

    // PodSandboxStatus gives the containers' statuses, and when it was taken (evented PLEG reads both).
    const sandboxStatus = await env.rt.runtime.call('PodSandboxStatus', { pod_sandbox_id: pod.id });
    assert.deepEqual(sandboxStatus.containers_statuses, [await env.status(c)]);
    assert.ok(BigInt(sandboxStatus.timestamp) > BigInt(sandboxStatus.containers_statuses[0]!.started_at), `timestamp ${sandboxStatus.timestamp}`);

    process.kill(pid, 'SIGKILL');
    // Its STOPPED comes from the exit watcher: nothing here reads the container's status before it arrives.
    const [stopped] = (await a.eventsOf(pod.id, 5)).slice(4);
    assert.equal(short(stopped!), `STOPPED ${c.slice(0, 6)}`);
    const killed = stopped!.containers_statuses.find((s) => s.id === c)!;
    assert.deepEqual([killed.state, killed.exit_code, killed.reason], ['CONTAINER_EXITED', 137, 'Error']);
    assert.deepEqual(killed, await env.status(c), 'the event carries the status ContainerStatus gives');

    await env.rt.runtime.call('StopPodSandbox', { pod_sandbox_id: pod.id });
    await env.rt.runtime.call('RemovePodSandbox', { pod_sandbox_id: pod.id });
    const p = pod.id.slice(0, 6);
    const k = c.slice(0, 6);
    const expected = [`CREATED ${p}`, `STARTED ${p}`, `CREATED ${k}`, `STARTED ${k}`, `STOPPED ${k}`, `STOPPED ${p}`, `DELETED ${k}`, `DELETED ${p}`];
    const got = await a.eventsOf(pod.id, 8);
    assert.deepEqual(got.map(short), expected);
    assert.deepEqual((await b.eventsOf(pod.id, 8)).map(short), expected, 'the second subscriber gets the same events');
    assert.deepEqual(got.map((e) => e.pod_sandbox_status!.state), [...Array(5).fill('SANDBOX_READY'), ...Array(3).fill('SANDBOX_NOTREADY')]);
    assert.deepEqual(got.map((e) => e.containers_statuses.map((s) => s.state).join()),
      ['', '', 'CONTAINER_CREATED', 'CONTAINER_RUNNING', 'CONTAINER_EXITED', 'CONTAINER_EXITED', '', '']);
    const times = got.map((e) => BigInt(e.created_at));
    assert.ok(times.every((x, i) => i === 0 || x > times[i - 1]!), `created_at grows: ${times.join(' ')}`);
    // Nothing else came for this pod.
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(a.events.filter((e) => e.pod_sandbox_status?.id === pod.id).length, 8);
  });

  it('cuts off a subscriber that stops reading once it lags past the bound, while another gets every event and the daemon\'s memory stays put', async (t) => {
    const reader = await subscribe(env);
    t.after(() => reader.cancel());
    const idle = idleServerStream(env.dirs.socket, '/runtime.v1.RuntimeService/GetContainerEvents');
    t.after(() => idle.close());
    const pod = await env.runPod(t, 'burst');
    // Containers that keep running make every event of the pod carry all their statuses: a few KiB each.
    for (let i = 0; i < 6; i++) await env.run(pod, `steady${i}`, ['sleep', '1000'], (c) => { c.labels = { ...c.labels, pad: 'x'.repeat(60) }; });
    const rssBefore = rssBytes(env.daemon.process.pid!);
    const cycles = 30;
    for (let i = 0; i < cycles; i++) {
      const id = await env.create(pod, `short${i}`, ['sleep', '1000']);
      await env.rt.runtime.call('StartContainer', { container_id: id });
      await env.rt.runtime.call('RemoveContainer', { container_id: id });
    }
    // 2 of the pause, 2 of each steady container, and CREATED, STARTED, STOPPED, DELETED of each short one.
    const total = 2 + 2 * 6 + 4 * cycles;
    const all = await reader.eventsOf(pod.id, total);
    assert.equal(all.filter((e) => e.container_event_type === 'CONTAINER_DELETED_EVENT').length, cycles);
    const cut = await idle.resume();
    assert.equal(cut.code, grpc.status.RESOURCE_EXHAUSTED, `the idle subscriber ended with ${grpc.status[cut.code]}: ${cut.details}`);
    assert.match(cut.details, /more than 8 events behind \(container_events_buffer\)/);
    assert.ok(cut.messages.length < total, `the idle subscriber got ${cut.messages.length} of ${total} events`);
    const rssAfter = rssBytes(env.daemon.process.pid!);
    // Generous: the burst itself (30 containers made and removed) moves the heap; an unbounded queue of
    // several-KiB events for the idle client would not stay inside it once events kept coming.
    assert.ok(rssAfter < rssBefore + 64 * 1024 * 1024, `daemon RSS went from ${rssBefore} to ${rssAfter}`);
    // The reader still receives after the cut.
    await env.rt.runtime.call('StopPodSandbox', { pod_sandbox_id: pod.id });
    await reader.eventsOf(pod.id, total + 7);
  });

  it('lists containers and sandboxes in streams that end with OK', async (t) => {
    const pod = await env.runPod(t, 'lists');
    const c = await env.create(pod, 'listed', ['sleep', '1000']);
    const read = async (name: 'StreamContainers' | 'StreamPodSandboxes') => {
      const items: string[] = [];
      for await (const m of env.rt.runtime.stream(name, {})) {
        const chunk = (m as { containers?: { id: string }[]; pod_sandboxes?: { id: string }[] });
        items.push(...(chunk.containers ?? chunk.pod_sandboxes ?? []).map((x) => x.id));
      }
      return items;
    };
    // The iteration ends without throwing only on OK.
    assert.ok((await read('StreamContainers')).includes(c));
    assert.ok((await read('StreamPodSandboxes')).includes(pod.id));
  });

  it('ends the stream with UNAVAILABLE when the daemon stops, so the client subscribes again', async () => {
    const s = await subscribe(env);
    await env.restartDaemon();
    const status = await s.ended;
    assert.equal(status.code, grpc.status.UNAVAILABLE, `${grpc.status[status.code]}: ${status.details}`);
    assert.match(status.details, /minicri is stopping/);
    const again = await subscribe(env);
    again.cancel();
    assert.equal((await again.ended).code, grpc.status.CANCELLED);
  });
});
