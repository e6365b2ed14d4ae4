// Every server-streaming RPC of the daemon's services, over a real grpc-js server on loopback with the
// domain on fakes: each ends with its status; the Stream* lists come in chunks; GetContainerEvents
// delivers in order to every subscriber, cuts off one that does not read once it lags past the bound
// (the others go on), and ends every stream with UNAVAILABLE when the daemon stops.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { silentLogger } from '../../../core/log.js';
import type { ImageRecord } from '../../../oci/image/types.js';
import type { PodEvent } from '../../../pod/events.js';
import { runSandbox } from '../../../pod/sandbox-run.js';
import type { Edge } from '../../../server/edge.js';
import { imageService } from '../../../server/image-service.js';
import { ITEMS_PER_MESSAGE } from '../../../server/list-streams.js';
import { listEncoders } from '../../../server/list-encoding.js';
import { loadCri } from '../../../server/proto.js';
import { runtimeService } from '../../../server/runtime-service.js';
import { bindService } from '../../../server/service.js';
import { fakePods, IMAGE, type FakePods } from '../../support/fake-pods.js';
import { idleServerStream } from '../../support/idle-grpc-stream.js';
import { sandboxConfig } from '../spec/fixtures.js';

interface Outcome { code: grpc.status; details: string; messages: unknown[] }

/** The messages of a server stream (so far, and once it ends) and the status it ends with. */
function outcome(call: grpc.ClientReadableStream<unknown>): Promise<Outcome> & { messages: unknown[] } {
  const messages: unknown[] = [];
  call.on('data', (m: unknown) => { messages.push(m); });
  call.on('error', () => undefined); // the status below says it
  const ended = new Promise<Outcome>((resolve) => call.on('status', (s: grpc.StatusObject) => resolve({ code: s.code, details: s.details, messages })));
  return Object.assign(ended, { messages });
}

// A stream that never ends would hang the run: the timeout makes it a failure.
describe('server-streaming RPCs', { timeout: 60_000 }, () => {
  const cri = loadCri();
  let f: FakePods;
  let server: grpc.Server;
  let address: string;
  const clients: grpc.Client[] = [];
  /** A client on a connection of its own: one that does not read holds up only its own connection's window. */
  const client = () => {
    const c = new cri.RuntimeService(address, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
    clients.push(c);
    return c;
  };
  const images = { list: () => [IMAGE as ImageRecord] };
  const subscribers = () => f.ctx.events.subscriberCount;

  before(async () => {
    f = fakePods();
    const edge = { config: { runtimes: { runc: { path: 'runc' } }, default_runtime: 'runc' }, pods: f.ctx, images, lists: listEncoders(cri.RuntimeService.service) } as unknown as Edge;
    server = new grpc.Server();
    server.addService(cri.RuntimeService.service, bindService('runtime.v1.RuntimeService', cri.RuntimeService.service, runtimeService(edge), silentLogger));
    server.addService(cri.ImageService.service, bindService('runtime.v1.ImageService', cri.ImageService.service, imageService(edge), silentLogger));
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
    address = `127.0.0.1:${port}`;
  });
  after(() => {
    for (const c of clients) c.close();
    server.forceShutdown();
    f.close();
  });

  it('each one that lists ends with a status on an empty node', async () => {
    const rt = client();
    const img = new cri.ImageService(address, grpc.credentials.createInsecure());
    clients.push(img);
    const streaming = Object.entries(cri.RuntimeService.service).filter(([name, m]) => m.responseStream && name !== 'GetContainerEvents');
    assert.ok(streaming.length >= 5, streaming.map(([n]) => n).join());
    const listing = new Set(['StreamPodSandboxes', 'StreamContainers', 'StreamContainerStats', 'StreamPodSandboxStats']);
    for (const [name] of streaming) {
      // Resolving at all is the point: a stream that never ended would time the suite out.
      const { code, details } = await outcome((rt as unknown as Record<string, (r: object) => grpc.ClientReadableStream<unknown>>)[name]!({}));
      if (listing.has(name)) assert.equal(code, grpc.status.OK, `${name}: ${grpc.status[code]} ${details}`);
    }
    const { code, messages } = await outcome(img.StreamImages({}));
    assert.equal(code, grpc.status.OK);
    assert.deepEqual(messages.map((m) => (m as { images: { id: string }[] }).images.map((i) => i.id)), [[IMAGE.id]]);
  });

  it('a streamed list comes in chunks holding every item once, then OK', async () => {
    const ids = new Set<string>();
    for (let i = 0; i < ITEMS_PER_MESSAGE + 5; i++) {
      ids.add(await runSandbox(f.ctx, sandboxConfig({ metadata: { name: `p${i}`, uid: `u${i}`, namespace: 'default', attempt: 0 }, log_directory: join(f.dir, 'logs') }), '', silentLogger));
    }
    const { code, messages } = await outcome(client().StreamPodSandboxes({}));
    assert.equal(code, grpc.status.OK);
    const chunks = messages.map((m) => (m as { pod_sandboxes: { id: string }[] }).pod_sandboxes.map((s) => s.id));
    assert.deepEqual(chunks.map((c) => c.length), [ITEMS_PER_MESSAGE, 5]);
    assert.deepEqual(new Set(chunks.flat()), ids);
  });

  it('GetContainerEvents: every subscriber gets every event in order; one that does not read is cut off past the bound, then all end UNAVAILABLE at shutdown', async () => {
    const sandbox = f.ctx.tables.sandboxes.get(await runSandbox(f.ctx, sandboxConfig({ log_directory: join(f.dir, 'logs') }), '', silentLogger))!;
    const reader = outcome(client().GetContainerEvents({}));
    const idle = idleServerStream(address, '/runtime.v1.RuntimeService/GetContainerEvents');
    while (subscribers() < 2) await new Promise((r) => setTimeout(r, 10));
    // Far more than the connection's flow-control window and the fake's bound (16) can hold for the idle one.
    const total = 3000;
    for (let i = 0; i < total; i++) {
      const event: PodEvent = { type: 'CONTAINER_STARTED_EVENT', containerId: `c${i}`, createdAt: String(i + 1), sandbox, containers: [] };
      f.ctx.events.publish(event);
      // In batches the reading client keeps up with: it must never lag past the bound itself.
      if (i % 8 === 7) while (reader.messages.length < i + 1) await new Promise((r) => setImmediate(r));
    }
    // Publishing never waited for the idle subscriber; once cut off it is no longer one.
    assert.equal(subscribers(), 1, 'the idle subscriber was cut off once its window and the bound were full');
    const cut = await idle.resume();
    idle.close();
    assert.equal(cut.code, grpc.status.RESOURCE_EXHAUSTED, cut.details);
    assert.match(cut.details, /more than 16 events behind \(container_events_buffer\)/);
    assert.ok(cut.messages.length < total, `the idle subscriber got ${cut.messages.length} of ${total}`);
    const decode = cri.RuntimeService.service.GetContainerEvents!.responseDeserialize;
    const got = cut.messages.map((m) => (decode(m) as { container_id: string }).container_id);
    assert.deepEqual(got, got.map((_, i) => `c${i}`), 'what it got before the cut came in order');
    f.ctx.events.close();
    const all = await reader;
    assert.equal(all.code, grpc.status.UNAVAILABLE, all.details);
    assert.equal(all.messages.length, total);
    const first = all.messages[0] as { container_id: string; container_event_type: string; created_at: string; pod_sandbox_status: { id: string; state: string } };
    assert.deepEqual([first.container_id, first.container_event_type, first.created_at, first.pod_sandbox_status.id, first.pod_sandbox_status.state],
      ['c0', 'CONTAINER_STARTED_EVENT', '1', sandbox.id, 'SANDBOX_READY']);
    assert.deepEqual(all.messages.map((m) => (m as { container_id: string }).container_id), [...Array(total).keys()].map((i) => `c${i}`));
  });
});
