// Container events from the lifecycle, driven through the domain's fakes: each operation's state change
// makes exactly its event, with the pod as it is right after it; the exit watcher's word records an exit
// (and its STOPPED) without any read asking for it; the transition table of eventsOf on its own.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { silentLogger } from '../../../core/log.js';
import { createContainer } from '../../../pod/container-create.js';
import { removeContainer } from '../../../pod/container-remove.js';
import { startContainer } from '../../../pod/container-start.js';
import { stopContainer } from '../../../pod/container-stop.js';
import type { Subscription } from '../../../pod/event-hub.js';
import { eventsOf, type PodEvent } from '../../../pod/events.js';
import { recordExitsAsTheyHappen } from '../../../pod/exits.js';
import { removeSandbox } from '../../../pod/sandbox-remove.js';
import { runSandbox } from '../../../pod/sandbox-run.js';
import { stopSandbox } from '../../../pod/sandbox-stop.js';
import { fakePods, type FakePods } from '../../support/fake-pods.js';
import { containerConfig, sandboxConfig } from '../spec/fixtures.js';

/** The events queued so far, as "TYPE id-prefix" with the container states they carry. */
async function take(s: Subscription<PodEvent>, n: number): Promise<PodEvent[]> {
  const got: PodEvent[] = [];
  while (got.length < n) got.push((await s.next())!);
  return got;
}
const appConfig = () => containerConfig({ image: { image: 'example.test/app:1', annotations: {}, user_specified_image: '', runtime_handler: '', image_ref: '' } });
const short = (e: PodEvent) => `${e.type.replace(/^CONTAINER_|_EVENT$/g, '')} ${e.containerId.slice(0, 6)}`;

describe('container events from the lifecycle', () => {
  let f: FakePods;
  beforeEach(() => { f = fakePods(); });
  afterEach(() => f.close());

  it('a pod and a container each get CREATED, STARTED, STOPPED and DELETED, in order, with the pod as it is after each', async () => {
    const events = f.ctx.events.subscribe();
    const pod = await runSandbox(f.ctx, sandboxConfig({ log_directory: join(f.dir, 'logs') }), '', silentLogger);
    const c = await createContainer(f.ctx, pod, appConfig(), null, silentLogger);
    await startContainer(f.ctx, c, silentLogger);
    await stopContainer(f.ctx, c, 0, silentLogger);
    await removeContainer(f.ctx, c, silentLogger);
    await stopSandbox(f.ctx, pod, silentLogger);
    await removeSandbox(f.ctx, pod, silentLogger);
    const got = await take(events, 8);
    const p = pod.slice(0, 6);
    const k = c.slice(0, 6);
    assert.deepEqual(got.map(short), [
      `CREATED ${p}`, `STARTED ${p}`, `CREATED ${k}`, `STARTED ${k}`, `STOPPED ${k}`, `DELETED ${k}`, `STOPPED ${p}`, `DELETED ${p}`,
    ]);
    assert.deepEqual(got.map((e) => e.sandbox.state), [
      'SANDBOX_READY', 'SANDBOX_READY', 'SANDBOX_READY', 'SANDBOX_READY', 'SANDBOX_READY', 'SANDBOX_READY', 'SANDBOX_NOTREADY', 'SANDBOX_NOTREADY',
    ]);
    assert.deepEqual(got.map((e) => e.containers.map((r) => r.state).join()), [
      '', '', 'CONTAINER_CREATED', 'CONTAINER_RUNNING', 'CONTAINER_EXITED', '', '', '',
    ]);
    const times = got.map((e) => BigInt(e.createdAt));
    assert.ok(times.every((t, i) => i === 0 || t > times[i - 1]!), `created_at grows: ${times.join(' ')}`);
    assert.equal(f.ctx.events.listening, true);
    events.unsubscribe();
  });

  it('an idempotent repeat (a second stop) makes no event', async () => {
    const pod = await runSandbox(f.ctx, sandboxConfig({ log_directory: join(f.dir, 'logs') }), '', silentLogger);
    const events = f.ctx.events.subscribe();
    await stopSandbox(f.ctx, pod, silentLogger);
    await stopSandbox(f.ctx, pod, silentLogger);
    await removeSandbox(f.ctx, pod, silentLogger);
    assert.deepEqual((await take(events, 2)).map((e) => e.type), ['CONTAINER_STOPPED_EVENT', 'CONTAINER_DELETED_EVENT']);
    f.ctx.events.close();
    assert.equal(await events.next(), undefined, 'nothing else was queued');
  });

  it('records an exit the watcher tells of, with its STOPPED event, without any read of the container', async () => {
    const runtime = f.ctx.runtimes.get('runc')!;
    const listeners: ((id: string) => void)[] = [];
    const exited = new Set<string>();
    runtime.exits = { mayHaveExited: (id) => exited.has(id), onExit: (l) => listeners.push(l) };
    runtime.exitStatus = async (id) => (exited.has(id) ? { exitCode: 137, finishedAt: new Date(), oomKilled: false } : undefined);
    recordExitsAsTheyHappen(f.ctx);
    const pod = await runSandbox(f.ctx, sandboxConfig({ log_directory: join(f.dir, 'logs') }), '', silentLogger);
    const c = await createContainer(f.ctx, pod, appConfig(), null, silentLogger);
    await startContainer(f.ctx, c, silentLogger);
    const events = f.ctx.events.subscribe();
    exited.add(c);
    for (const l of listeners) l(c);
    const [stopped] = await take(events, 1);
    assert.equal(stopped!.type, 'CONTAINER_STOPPED_EVENT');
    assert.equal(stopped!.containerId, c);
    assert.deepEqual(stopped!.containers.map((r) => [r.state, r.exitCode, r.reason]), [['CONTAINER_EXITED', 137, 'Error']]);
    // The pause's exit makes the sandbox NOTREADY: the pause's STOPPED.
    exited.add(pod);
    for (const l of listeners) l(pod);
    const [pause] = await take(events, 1);
    assert.deepEqual([pause!.type, pause!.containerId, pause!.sandbox.state], ['CONTAINER_STOPPED_EVENT', pod, 'SANDBOX_NOTREADY']);
    events.unsubscribe();
  });
});

describe('eventsOf', () => {
  const R = 'RUN';
  const X = 'EXIT';
  const s = (state: string, creating = false) => ({ state, creating });
  it('maps each write to the events of its change', () => {
    assert.deepEqual(eventsOf(undefined, s('NEW', true), R, X), [], 'a record being made is no one\'s yet');
    assert.deepEqual(eventsOf(s('NEW', true), s('NEW', true), R, X), []);
    assert.deepEqual(eventsOf(s('NEW', true), s('NEW'), R, X), ['CONTAINER_CREATED_EVENT']);
    assert.deepEqual(eventsOf(s('NEW', true), s(R), R, X), ['CONTAINER_CREATED_EVENT', 'CONTAINER_STARTED_EVENT'], 'a sandbox is made READY');
    assert.deepEqual(eventsOf(s('NEW'), s(R), R, X), ['CONTAINER_STARTED_EVENT']);
    assert.deepEqual(eventsOf(s(R), s(R), R, X), []);
    assert.deepEqual(eventsOf(s(R), s(X), R, X), ['CONTAINER_STOPPED_EVENT']);
    assert.deepEqual(eventsOf(s('NEW'), s(X), R, X), ['CONTAINER_STOPPED_EVENT'], 'a failed start stops a container that never ran');
    assert.deepEqual(eventsOf(s(X), s(X), R, X), [], 'an exit recorded again');
    assert.deepEqual(eventsOf(s(X), undefined, R, X), ['CONTAINER_DELETED_EVENT']);
    assert.deepEqual(eventsOf(s('NEW', true), undefined, R, X), [], 'an undone creation was never announced');
  });
});
