// The server edge over a real grpc-js server on loopback: every call ends with its status, streams too.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { Cancelled, DeadlineExceeded, Unimplemented } from '../../../core/errors.js';
import { silentLogger } from '../../../core/log.js';
import { loadCri } from '../../../server/proto.js';
import { serverStream, unimplemented } from '../../../server/rpc.js';
import { idleServerStream } from '../../support/idle-grpc-stream.js';

/** The status a server stream ends with, and the messages before it. */
function outcome(call: grpc.ClientReadableStream<unknown>): Promise<{ code: grpc.status; details: string; messages: number }> {
  let messages = 0;
  call.on('data', () => { messages++; });
  call.on('error', () => undefined); // the status below says it
  return new Promise((resolve) => call.on('status', (s: grpc.StatusObject) => resolve({ code: s.code, details: s.details, messages })));
}

// A stream that never ends would hang the run: the timeout makes it a failure.
describe('server streams', { timeout: 10_000 }, () => {
  const cri = loadCri();
  const server = new grpc.Server();
  let client: InstanceType<typeof cri.RuntimeService>;
  let address: string;
  let fail: () => Promise<void>;
  /** Told of each StreamContainers call the server's handler has, with the call's signal. */
  let served: (signal: AbortSignal) => void = () => undefined;
  before(async () => {
    server.addService(cri.RuntimeService.service, {
      GetContainerEvents: serverStream('GetContainerEvents', async (_req, emit) => {
        emit({ container_id: 'a' });
        await fail();
      }, silentLogger),
      StreamPodSandboxes: unimplemented('runtime.v1.RuntimeService', 'StreamPodSandboxes', silentLogger, true),
      StreamContainers: serverStream('StreamContainers', async (_req, _emit, ctx) => {
        served(ctx.signal);
        await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
      }, silentLogger),
    });
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
    address = `127.0.0.1:${port}`;
    client = new cri.RuntimeService(address, grpc.credentials.createInsecure());
  });
  after(() => { client.close(); server.forceShutdown(); });

  it('a handler\'s signal tells a client that gave up (CANCELLED) from one whose deadline passed (DEADLINE_EXCEEDED)', async () => {
    const nextServed = () => new Promise<AbortSignal>((resolve) => { served = resolve; });
    const abortReason = (signal: AbortSignal) => new Promise<unknown>((resolve) => {
      if (signal.aborted) resolve(signal.reason);
      else signal.addEventListener('abort', () => resolve(signal.reason), { once: true });
    });
    const first = nextServed();
    const call = client.StreamContainers({});
    call.on('error', () => undefined);
    // Cancelled once the handler has the call: a cancel that reached the server first would end the call before any handler ran.
    const signal = await first;
    call.cancel();
    assert.ok((await abortReason(signal)) instanceof Cancelled);
    // A deadline the server alone ends: grpc-js's client cancels at its own deadline, which a loaded server can
    // see before its timer fires, and a cancel from the client says nothing of why.
    const second = nextServed();
    const late = idleServerStream(address, '/runtime.v1.RuntimeService/StreamContainers', { 'grpc-timeout': '100m' });
    try {
      assert.ok((await abortReason(await second)) instanceof DeadlineExceeded);
    } finally {
      late.close();
    }
  });

  it('a failing handler ends the stream with its error, after what it sent', async () => {
    fail = async () => { throw new Unimplemented('not here yet'); };
    assert.deepEqual(await outcome(client.GetContainerEvents({})), { code: grpc.status.UNIMPLEMENTED, details: 'not here yet', messages: 1 });
  });

  it('a handler that returns ends the stream with OK', async () => {
    fail = async () => {};
    assert.deepEqual(await outcome(client.GetContainerEvents({})), { code: grpc.status.OK, details: 'OK', messages: 1 });
  });

  it('an unimplemented server stream answers UNIMPLEMENTED', async () => {
    const { code } = await outcome(client.StreamPodSandboxes({}) as grpc.ClientReadableStream<unknown>);
    assert.equal(code, grpc.status.UNIMPLEMENTED);
  });
});
