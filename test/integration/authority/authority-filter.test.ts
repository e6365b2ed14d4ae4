// The authority filter end to end: the real daemon (which puts every connection through the filter)
// answering raw HTTP/2 clients, a grpc-js client and hand-framed bytes over its unix socket.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import { loadCri } from '../../../server/proto.js';
import { makeDaemonDirs, removeDirs, TestDaemon, type DaemonDirs } from '../../support/daemon.js';
import { hostCheck } from '../../support/pod-daemon.js';
import { connectRaw, rawUnary, startEchoServer } from '../../support/echo-server.js';
import {
  CONTINUATION, DATA, END_HEADERS, END_STREAM, GOAWAY, HEADERS, RST_STREAM, SETTINGS, clientEncoder, connectionStart, decodeBlock, encodeFields, frame,
  grpcMessage, parseFrames, serverDecoder, splitHeaderBlocks,
} from '../../support/h2-frames.js';

const SOCKET_AUTHORITY = '/run/minicri/minicri.sock';
const VERSION_PATH = '/runtime.v1.RuntimeService/Version';
const version = loadCri().RuntimeService.service.Version;
const VERSION_REQUEST = version.requestSerialize({ version: 'v1' });

function runtimeName(message: Buffer): string {
  return (version.responseDeserialize(message) as { runtime_name: string }).runtime_name;
}

/** A raw HTTP/2 session to `socketPath`, closed after the test. */
function session(t: { after(fn: () => void): void }, socketPath: string) {
  const s = connectRaw(socketPath);
  // The server may close first at teardown; a failing call still rejects through its stream.
  s.on('error', () => {});
  t.after(() => { s.destroy(); });
  return s;
}

// Daemons, pods and pulls of this file leave nothing on the host.
hostCheck('the authority filter tests');

it('without the filter nghttp2 resets a socket-path authority (the problem being fixed)', async (t) => {
  const server = await startEchoServer('inject');
  t.after(() => server.close());
  await assert.rejects(rawUnary(session(t, server.socketPath), { authority: SOCKET_AUTHORITY, request: Buffer.from('x') }), /PROTOCOL_ERROR/);
});

describe('the daemon answers whatever authority comes over its socket', () => {
  let dirs: DaemonDirs;
  let daemon: TestDaemon;

  before(async () => {
    dirs = makeDaemonDirs();
    daemon = await TestDaemon.start(dirs);
  });
  after(async () => {
    await daemon?.stop();
    removeDirs(dirs);
  });

  for (const [name, authority] of [['a socket path', SOCKET_AUTHORITY], ['localhost', 'localhost'], ['no (host only)', null], ['an empty', '']] as const) {
    it(`${name} :authority: several Version calls on one connection`, async (t) => {
      const s = session(t, dirs.socket);
      for (let i = 0; i < 5; i++) {
        const answer = await rawUnary(s, { authority, path: VERSION_PATH, request: VERSION_REQUEST });
        assert.equal(answer.grpcStatus, '0', answer.grpcMessage ?? 'no grpc-message');
        assert.equal(runtimeName(answer.message), 'minicri');
      }
    });
  }

  it('concurrent interleaved streams with a socket-path authority all succeed', async (t) => {
    const s = session(t, dirs.socket);
    // An unknown field (15, bytes) makes each request span several DATA frames; protobuf skips it.
    const padding = Buffer.alloc(20_000, 0x61);
    const request = Buffer.concat([VERSION_REQUEST, Buffer.from([0x7a, 0xa0, 0x9c, 0x01]), padding]);
    const answers = await Promise.all(Array.from({ length: 40 }, () =>
      rawUnary(s, { authority: SOCKET_AUTHORITY, path: VERSION_PATH, request, bodyChunks: 8 })));
    for (const a of answers) {
      assert.equal(a.grpcStatus, '0', a.grpcMessage ?? 'no grpc-message');
      assert.equal(runtimeName(a.message), 'minicri');
    }
  });

  it('a grpc-js client sending the socket path as its authority is answered', async (t) => {
    const client = new grpc.Client(`unix://${dirs.socket}`, grpc.credentials.createInsecure(), { 'grpc.default_authority': SOCKET_AUTHORITY });
    t.after(() => client.close());
    for (let i = 0; i < 3; i++) {
      const reply = await new Promise<{ runtime_name: string }>((resolve, reject) =>
        client.makeUnaryRequest(VERSION_PATH, version.requestSerialize, version.responseDeserialize, { version: 'v1' },
          (err, value) => (err ? reject(err) : resolve(value as { runtime_name: string }))));
      assert.equal(reply.runtime_name, 'minicri');
    }
  });

  it('a hand-framed request with neither :authority nor host is answered', { timeout: 20_000 }, async (t) => {
    const socket = net.connect(dirs.socket);
    t.after(() => { socket.destroy(); });
    await once(socket, 'connect');
    const fields: Array<[string, string]> = [
      [':method', 'POST'], [':scheme', 'http'], [':path', VERSION_PATH], ['content-type', 'application/grpc'], ['te', 'trailers'],
    ];
    socket.write(Buffer.concat([
      connectionStart(),
      frame(HEADERS, END_HEADERS, 1, encodeFields(clientEncoder(), fields)),
      frame(DATA, END_STREAM, 1, grpcMessage(VERSION_REQUEST)),
    ]));
    // Read until the trailers (HEADERS with END_STREAM) arrive; acknowledge the server's SETTINGS once.
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
      const refused = frames.find((f) => f.type === RST_STREAM || f.type === GOAWAY);
      if (refused) assert.fail(`the server refused the request (frame type ${refused.type}, error code ${refused.payload.readUInt32BE(refused.type === GOAWAY ? 4 : 0)})`);
      if (!frames.some((f) => f.type === HEADERS && (f.flags & END_STREAM))) continue;
      const { blocks, others } = splitHeaderBlocks(frames);
      const decoder = serverDecoder();
      const [responseHeaders, trailers] = blocks.map((b) => new Map(decodeBlock(decoder, b.block)));
      assert.equal(responseHeaders!.get(':status'), '200');
      assert.equal(trailers!.get('grpc-status'), '0', trailers!.get('grpc-message') ?? 'no grpc-message');
      const body = Buffer.concat(others.filter((f) => f.type === DATA).map((f) => f.payload));
      assert.equal(runtimeName(body.subarray(5)), 'minicri');
      break;
    }
  });

  it('a client breaking HTTP/2 loses its own connection only', async (t) => {
    const good = session(t, dirs.socket);
    const call = () => rawUnary(good, { authority: SOCKET_AUTHORITY, path: VERSION_PATH, request: VERSION_REQUEST });
    assert.equal((await call()).grpcStatus, '0');
    const bad = net.connect(dirs.socket);
    t.after(() => { bad.destroy(); });
    bad.on('error', () => {});
    bad.resume();
    bad.write(Buffer.concat([connectionStart(), frame(CONTINUATION, END_HEADERS, 1, Buffer.from([0x82]))]));
    await once(bad, 'close');
    assert.equal(runtimeName((await call()).message), 'minicri');
    assert.equal(daemon.process.exitCode, null, 'the daemon is still running');
  });
});
