import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import { ECHO_PATH, connectRaw, rawUnary, startEchoServer, type EchoServer } from './echo-server.js';
import {
  CONTINUATION, DATA, END_HEADERS, END_STREAM, HEADERS, SETTINGS, clientEncoder, connectionStart, decodeBlock, encodeFields, frame,
  grpcMessage, parseFrames, serverDecoder, splitHeaderBlocks,
} from '../../unit/authority/h2-frames.js';

const SOCKET_AUTHORITY = '/run/minicri/minicri.sock';

async function withServer(t: { after(fn: () => Promise<void>): void }, wiring?: 'filter' | 'inject'): Promise<EchoServer> {
  const server = await startEchoServer(wiring);
  t.after(() => server.close());
  return server;
}

function session(t: { after(fn: () => void): void }, socketPath: string) {
  const s = connectRaw(socketPath);
  // The server may close first at teardown; a failing call still rejects through its stream.
  s.on('error', () => {});
  t.after(() => { s.destroy(); });
  return s;
}

test('without the filter nghttp2 resets a socket-path authority (the problem being fixed)', async (t) => {
  const server = await withServer(t, 'inject');
  await assert.rejects(rawUnary(session(t, server.socketPath), SOCKET_AUTHORITY, Buffer.from('x')), /reset|PROTOCOL/i);
});

for (const [name, authority] of [['a socket path', SOCKET_AUTHORITY], ['localhost', 'localhost'], ['no (host only)', null], ['an empty', '']] as const) {
  test(`${name} :authority gets a valid unary answer, several calls on one connection`, async (t) => {
    const server = await withServer(t);
    const s = session(t, server.socketPath);
    for (let i = 0; i < 5; i++) {
      const answer = await rawUnary(s, authority, Buffer.from(`call ${i}`));
      assert.equal(answer.grpcStatus, '0', answer.grpcMessage);
      assert.equal(answer.message.toString(), `echo:call ${i}`);
    }
  });
}

test('concurrent interleaved streams with a socket-path authority all succeed', async (t) => {
  const server = await withServer(t);
  const s = session(t, server.socketPath);
  const calls = Array.from({ length: 40 }, (_, i) => rawUnary(s, SOCKET_AUTHORITY, Buffer.alloc(20_000 + i, 65 + (i % 26)), 8));
  const answers = await Promise.all(calls);
  answers.forEach((a, i) => {
    assert.equal(a.grpcStatus, '0', a.grpcMessage);
    assert.ok(a.message.equals(Buffer.concat([Buffer.from('echo:'), Buffer.alloc(20_000 + i, 65 + (i % 26))])), `call ${i}`);
  });
});

test('a grpc-js client sending the socket path as its authority is answered', async (t) => {
  const server = await withServer(t);
  const client = new grpc.Client(`unix://${server.socketPath}`, grpc.credentials.createInsecure(), {
    'grpc.default_authority': SOCKET_AUTHORITY,
  });
  t.after(() => client.close());
  const identity = (b: Buffer): Buffer => b;
  for (let i = 0; i < 3; i++) {
    const reply = await new Promise<Buffer>((resolve, reject) =>
      client.makeUnaryRequest(ECHO_PATH, identity, identity, Buffer.from(`g${i}`), (err, value) => (err ? reject(err) : resolve(value!))));
    assert.equal(reply.toString(), `echo:g${i}`);
  }
});

test('a hand-framed request with no :authority and no host at all is answered', async (t) => {
  const server = await withServer(t);
  const socket = net.connect(server.socketPath);
  t.after(() => { socket.destroy(); });
  await once(socket, 'connect');
  const fields: Array<[string, string]> = [
    [':method', 'POST'], [':scheme', 'http'], [':path', ECHO_PATH], ['content-type', 'application/grpc'], ['te', 'trailers'],
  ];
  socket.write(Buffer.concat([
    connectionStart(),
    frame(HEADERS, END_HEADERS, 1, encodeFields(clientEncoder(), fields)),
    frame(DATA, END_STREAM, 1, grpcMessage(Buffer.from('bare'))),
  ]));
  // Read until the trailers (a HEADERS frame with END_STREAM) arrive, acknowledging the server's SETTINGS.
  let received = Buffer.alloc(0);
  let acked = false;
  for (;;) {
    const [chunk] = (await once(socket, 'data')) as [Buffer];
    received = Buffer.concat([received, chunk]);
    let frames;
    try { frames = parseFrames(received); } catch { continue; }
    if (!acked && frames.some((f) => f.type === SETTINGS && f.flags === 0)) {
      socket.write(frame(SETTINGS, 1, 0));
      acked = true;
    }
    if (!frames.some((f) => f.type === HEADERS && (f.flags & END_STREAM))) continue;
    const { blocks, others } = splitHeaderBlocks(frames);
    const decoder = serverDecoder();
    const [responseHeaders, trailers] = blocks.map((b) => new Map(decodeBlock(decoder, b.block)));
    assert.equal(responseHeaders!.get(':status'), '200');
    assert.equal(trailers!.get('grpc-status'), '0', trailers!.get('grpc-message'));
    const body = Buffer.concat(others.filter((f) => f.type === DATA).map((f) => f.payload));
    assert.equal(body.subarray(5).toString(), 'echo:bare');
    break;
  }
});

test('a client breaking HTTP/2 loses its own connection only', async (t) => {
  const server = await withServer(t);
  const good = session(t, server.socketPath);
  assert.equal((await rawUnary(good, SOCKET_AUTHORITY, Buffer.from('before'))).grpcStatus, '0');
  const bad = net.connect(server.socketPath);
  t.after(() => { bad.destroy(); });
  bad.on('error', () => {});
  bad.resume();
  bad.write(Buffer.concat([connectionStart(), frame(CONTINUATION, END_HEADERS, 1, Buffer.from([0x82]))]));
  await once(bad, 'close');
  const answer = await rawUnary(good, SOCKET_AUTHORITY, Buffer.from('after'));
  assert.equal(answer.message.toString(), 'echo:after');
});
