import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Duplex } from 'node:stream';
import { once } from 'node:events';
import { ClientFrameFilter, authorityProblem, filterAuthority, frameHeaderBlock, isAcceptedAuthority, withLocalAuthority } from '../../../http2/authority-filter.js';
import { InvalidArgument } from '../../../core/errors.js';
import {
  CONTINUATION, DATA, END_HEADERS, END_STREAM, HEADERS, PADDED, PING, PRIORITY, type Fields,
  clientEncoder, connectionStart, decodeBlock, encodeFields, frame, grpcMessage, parseFrames,
  requestFields, serverDecoder, splitHeaderBlocks, tableSizeUpdate,
} from '../../support/h2-frames.js';

const SOCKET_AUTHORITY = '/run/minicri/minicri.sock';

/** Feeds `input` in chunks of `chunkSize` bytes (all at once by default) and joins the output. */
function run(input: Buffer, chunkSize = input.length, filter = new ClientFrameFilter()): Buffer {
  const out: Buffer[] = [];
  for (let i = 0; i < input.length; i += chunkSize) out.push(...filter.push(input.subarray(i, i + chunkSize)));
  return Buffer.concat(out);
}

/** The header lists a server would decode from `output`, and the non-header frames around them. */
function serverView(output: Buffer): { requests: Array<{ streamId: number; endStream: boolean; fields: Fields }>; others: ReturnType<typeof parseFrames> } {
  assert.ok(output.subarray(0, 24).equals(connectionStart().subarray(0, 24)), 'output starts with the preface');
  const { blocks, others } = splitHeaderBlocks(parseFrames(output.subarray(24)));
  const decoder = serverDecoder();
  return { requests: blocks.map((b) => ({ streamId: b.streamId, endStream: b.endStream, fields: decodeBlock(decoder, b.block) })), others };
}

function withAuthority(fields: Fields, authority: string): Fields {
  return fields.map(([n, v]) => [n, n === ':authority' ? authority : v]);
}

function unaryCall(streamId: number, block: Buffer, body = Buffer.from('\x0a\x02v1', 'latin1')): Buffer {
  return Buffer.concat([frame(HEADERS, END_HEADERS, streamId, block), frame(DATA, END_STREAM, streamId, grpcMessage(body))]);
}

test('authority check accepts host forms nghttp2 accepts and rejects paths', () => {
  for (const ok of ['localhost', 'localhost:1234', '127.0.0.1:80', '[::1]:9', 'unix', 'a%2Fb', 'u@h', "!$&'()*+,;="]) assert.ok(isAcceptedAuthority(ok), ok);
  for (const bad of [SOCKET_AUTHORITY, 'unix:///run/x.sock', '', 'a b', 'x?y', 'x#y', 'a"b', 'a^b', 'a|b', 'a\\b', 'é', 'a\tb']) assert.ok(!isAcceptedAuthority(bad), bad);
});

test('a valid authority is passed through byte-identical, whatever the chunking', () => {
  const enc = clientEncoder();
  const input = Buffer.concat([
    connectionStart(),
    unaryCall(1, encodeFields(enc, requestFields('localhost'))),
    frame(PING, 0, 0, Buffer.alloc(8, 7)),
    unaryCall(3, encodeFields(enc, requestFields('localhost'))),
  ]);
  for (const chunk of [input.length, 1, 7, 100]) {
    const filter = new ClientFrameFilter();
    assert.ok(run(input, chunk, filter).equals(input), `chunk size ${chunk}`);
    assert.equal(filter.mode, 'pass');
  }
});

test('no :authority but an accepted host header is passed through byte-identical', () => {
  const fields: Fields = [...requestFields(null), ['host', 'localhost']];
  const input = Buffer.concat([connectionStart(), unaryCall(1, encodeFields(clientEncoder(), fields))]);
  const filter = new ClientFrameFilter();
  assert.ok(run(input, 5, filter).equals(input));
  assert.equal(filter.mode, 'pass');
});

test('a request with neither :authority nor host gets :authority localhost after its pseudo-headers', () => {
  const enc = clientEncoder();
  const input = Buffer.concat([connectionStart(), unaryCall(1, encodeFields(enc, requestFields(null))), unaryCall(3, encodeFields(enc, requestFields(null)))]);
  const seen: string[] = [];
  const { requests } = serverView(run(input, 64, new ClientFrameFilter((problem) => seen.push(problem))));
  assert.deepEqual(seen, ['neither :authority nor host']);
  for (const r of requests) assert.deepEqual(r.fields, requestFields('localhost'));
});

test('authorityProblem and withLocalAuthority', () => {
  const f = (pairs: Fields) => pairs.map(([name, value]) => ({ name, value, neverIndex: name === 'authorization' }));
  assert.equal(authorityProblem(f(requestFields('localhost'))), null);
  assert.equal(authorityProblem(f([...requestFields(null), ['host', 'a:1']])), null);
  assert.equal(authorityProblem(f(requestFields(SOCKET_AUTHORITY))), `:authority "${SOCKET_AUTHORITY}"`);
  assert.equal(authorityProblem(f([...requestFields('localhost'), ['host', '/x']])), 'host "/x"');
  assert.equal(authorityProblem(f(requestFields(null))), 'neither :authority nor host');
  // A refused host is replaced, an accepted one kept, sensitive fields stay never-indexed.
  assert.deepEqual(withLocalAuthority(f([[':method', 'GET'], [':path', '/'], ['host', '/x'], ['authorization', 's']])),
    [...f([[':method', 'GET'], [':path', '/'], ['host', 'localhost']]), { name: 'authorization', value: 's', neverIndex: true }]);
  assert.deepEqual(withLocalAuthority(f([[':method', 'GET'], ['host', 'ok:1']])), f([[':method', 'GET'], ['host', 'ok:1']]));
  assert.deepEqual(withLocalAuthority(f([[':method', 'GET'], [':path', '/']])), f([[':method', 'GET'], [':path', '/'], [':authority', 'localhost']]));
  // Trailers are not requests: nothing is added.
  assert.deepEqual(withLocalAuthority(f([['grpc-status', '0']])), f([['grpc-status', '0']]));
});

test('a socket-path authority is rewritten to localhost on every request, other frames untouched', () => {
  const enc = clientEncoder();
  const fields = requestFields(SOCKET_AUTHORITY);
  // Several requests on one connection: from the second on the client refers to its dynamic table.
  const calls = [1, 3, 5, 7].map((id) => unaryCall(id, encodeFields(enc, fields)));
  assert.ok(calls[1]!.length < calls[0]!.length, 'later requests use the dynamic table');
  const input = Buffer.concat([connectionStart(), ...calls]);
  const seen: string[] = [];
  const filter = new ClientFrameFilter((authority) => seen.push(authority));
  const { requests, others } = serverView(run(input, 3, filter));
  assert.equal(filter.mode, 'rewrite');
  assert.deepEqual(seen, [`:authority "${SOCKET_AUTHORITY}"`]);
  assert.deepEqual(requests.map((r) => r.streamId), [1, 3, 5, 7]);
  for (const r of requests) {
    assert.deepEqual(r.fields, withAuthority(fields, 'localhost'));
    assert.equal(r.endStream, false);
  }
  assert.deepEqual(others.map((f) => [f.type, f.streamId]), [[4, 0], [8, 0], [0, 1], [0, 3], [0, 5], [0, 7]]);
  assert.ok(others[2]!.payload.equals(grpcMessage(Buffer.from('\x0a\x02v1', 'latin1'))));
});

// Captured from Node's http2 client (nghttp2's own HPACK encoder: Huffman strings, dynamic table
// references from the second request on): three POSTs with :authority /run/minicri/minicri.sock.
const CAPTURED_NGHTTP2_CLIENT = Buffer.from(
  '505249202a20485454502f322e300d0a0d0a534d0d0a0d0a00000004000000000000005e01040000000183049962cb6a49a92afdc2bedb6a49' +
  'a92ee2d9dcc42b1c4b620c7abf419262cb6a62935462586629354625865d07275f865f8b1d75d0620d263d4c4d656440027465864d833505b1' +
  '1f7a8a9acac8b4c7602b89c5c14085f2b107451f013000000900010000000100000000040a02763100002401040000000383049962cb6a49a9' +
  '2afdc2bedb6a49a92ee2d9dcc42b1c4b620c7abfc286c1c0bf7e013100000900010000000300000000040a02763100002401040000000583' +
  '049962cb6a49a92afdc2bedb6a49a92ee2d9dcc42b1c4b620c7abfc386c2c1c07e013200000900010000000500000000040a027631', 'hex');

test('captured nghttp2 client bytes: every request is rewritten, bodies untouched', () => {
  const { requests, others } = serverView(run(CAPTURED_NGHTTP2_CLIENT, 17));
  assert.deepEqual(requests.map((r) => r.streamId), [1, 3, 5]);
  requests.forEach((r, i) => {
    const fields = new Map(r.fields);
    assert.equal(fields.get(':authority'), 'localhost');
    assert.equal(fields.get(':path'), '/runtime.v1.RuntimeService/Version');
    assert.equal(fields.get('user-agent'), 'grpc-go/1.26.0');
    assert.equal(fields.get('x-call'), String(i));
    assert.equal(r.fields.length, 8);
  });
  assert.deepEqual(others.filter((f) => f.type === DATA).map((f) => f.payload.toString('hex')), Array(3).fill('00000000040a027631'));
});

test('END_STREAM on the HEADERS frame is kept when rewriting', () => {
  const block = encodeFields(clientEncoder(), requestFields(SOCKET_AUTHORITY));
  const input = Buffer.concat([connectionStart(), frame(HEADERS, END_HEADERS | END_STREAM, 1, block)]);
  const { requests } = serverView(run(input));
  assert.equal(requests[0]!.endStream, true);
});

test('a header block split across CONTINUATION frames is joined and rewritten', () => {
  const fields: Fields = [...requestFields(SOCKET_AUTHORITY), ['x-meta', 'v'.repeat(300)]];
  const block = encodeFields(clientEncoder(), fields);
  const [a, b, c] = [block.subarray(0, 10), block.subarray(10, 50), block.subarray(50)];
  const input = Buffer.concat([
    connectionStart(),
    frame(HEADERS, 0, 1, a), frame(CONTINUATION, 0, 1, b), frame(CONTINUATION, END_HEADERS, 1, c),
    frame(DATA, END_STREAM, 1, grpcMessage(Buffer.from('x'))),
  ]);
  const output = run(input, 11);
  const frames = parseFrames(output.subarray(24));
  assert.deepEqual(frames.map((f) => f.type), [4, 8, HEADERS, DATA], 'one HEADERS frame carries the whole block');
  assert.equal(frames[2]!.flags, END_HEADERS);
  assert.deepEqual(serverView(output).requests[0]!.fields, withAuthority(fields, 'localhost'));
});

test('a header block split across CONTINUATION frames with a valid authority passes byte-identical', () => {
  const block = encodeFields(clientEncoder(), requestFields('localhost'));
  const input = Buffer.concat([
    connectionStart(),
    frame(HEADERS, 0, 1, block.subarray(0, 5)), frame(CONTINUATION, END_HEADERS, 1, block.subarray(5)),
  ]);
  assert.ok(run(input, 4).equals(input));
});

test('padding and priority fields are removed when rewriting', () => {
  const fields = requestFields(SOCKET_AUTHORITY);
  const enc = clientEncoder();
  const padded = Buffer.concat([Buffer.from([6]), encodeFields(enc, fields), Buffer.alloc(6, 0)]);
  const priority = Buffer.concat([Buffer.from([0x80, 0, 0, 1, 200]), encodeFields(enc, fields)]);
  const both = Buffer.concat([Buffer.from([3]), Buffer.from([0, 0, 0, 3, 15]), encodeFields(enc, fields), Buffer.alloc(3, 0)]);
  const input = Buffer.concat([
    connectionStart(),
    frame(HEADERS, END_HEADERS | PADDED, 1, padded),
    frame(HEADERS, END_HEADERS | PRIORITY, 3, priority),
    frame(HEADERS, END_HEADERS | PADDED | PRIORITY | END_STREAM, 5, both),
  ]);
  const output = run(input, 13);
  const headerFrames = parseFrames(output.subarray(24)).filter((f) => f.type === HEADERS);
  assert.deepEqual(headerFrames.map((f) => f.flags), [END_HEADERS, END_HEADERS, END_HEADERS | END_STREAM]);
  for (const r of serverView(output).requests) assert.deepEqual(r.fields, withAuthority(fields, 'localhost'));
});

test('a padded HEADERS frame with a valid authority passes byte-identical', () => {
  const block = encodeFields(clientEncoder(), requestFields('localhost'));
  const input = Buffer.concat([connectionStart(), frame(HEADERS, END_HEADERS | PADDED | PRIORITY, 1,
    Buffer.concat([Buffer.from([4, 0, 0, 0, 0, 16]), block, Buffer.alloc(4)]))]);
  assert.ok(run(input).equals(input));
});

test('dynamic table size updates from the client are followed', () => {
  const fields: Fields = [...requestFields(SOCKET_AUTHORITY), ['x-big', 'b'.repeat(1500)]];
  const enc = clientEncoder();
  const first = encodeFields(enc, fields);
  // The client grows its table beyond the initial 4096 (allowed when the server advertises more), adds
  // entries past 4096 bytes, then refers to the oldest: a decoder stuck at 4096 would have evicted it.
  enc.updateTableSize(4096 * 3);
  const grown = Buffer.concat([tableSizeUpdate(4096 * 3), encodeFields(enc, [...fields, ['x-more', 'm'.repeat(1500)], ['x-more2', 'n'.repeat(1500)]])]);
  const reuse = encodeFields(enc, fields);
  // Then it shrinks to 0 (evicting everything) and starts over at 4096.
  enc.updateTableSize(0);
  enc.updateTableSize(4096);
  const reset = Buffer.concat([tableSizeUpdate(0), tableSizeUpdate(4096), encodeFields(enc, fields)]);
  const input = Buffer.concat([connectionStart(), ...[first, grown, reuse, reset].map((b, i) => unaryCall(2 * i + 1, b))]);
  const { requests } = serverView(run(input));
  assert.equal(requests.length, 4);
  assert.deepEqual(requests[2]!.fields, withAuthority(fields, 'localhost'));
  assert.deepEqual(requests[3]!.fields, withAuthority(fields, 'localhost'));
});

test('a table size update to 0 really evicts: a later reference to an old entry is malformed', () => {
  const enc = clientEncoder();
  const first = encodeFields(enc, requestFields(SOCKET_AUTHORITY));
  const stale = Buffer.concat([tableSizeUpdate(0), Buffer.from([0x80 | 62])]); // indexed field 62: first dynamic entry
  const filter = new ClientFrameFilter();
  filter.push(Buffer.concat([connectionStart(), unaryCall(1, first)]));
  assert.throws(() => filter.push(unaryCall(3, stale)), InvalidArgument);
});

test('a rewritten block larger than a frame is cut into HEADERS + CONTINUATION of at most 16384 bytes', () => {
  const fields: Fields = [...requestFields(SOCKET_AUTHORITY), ['x-large', 'z'.repeat(40_000)]];
  const block = encodeFields(clientEncoder(), fields);
  const pieces = [];
  for (let i = 0; i < block.length; i += 16_384) pieces.push(block.subarray(i, i + 16_384));
  const input = Buffer.concat([
    connectionStart(),
    ...pieces.map((p, i) => frame(i === 0 ? HEADERS : CONTINUATION, i === pieces.length - 1 ? END_HEADERS : 0, 1, p)),
  ]);
  const output = run(input, 1000);
  const frames = parseFrames(output.subarray(24)).slice(2);
  assert.deepEqual(frames.map((f) => f.type), [HEADERS, CONTINUATION, CONTINUATION]);
  assert.ok(frames.every((f) => f.payload.length <= 16_384));
  assert.deepEqual(frames.map((f) => f.flags), [0, 0, END_HEADERS]);
  assert.deepEqual(serverView(output).requests[0]!.fields, withAuthority(fields, 'localhost'));
});

test('while rewriting, other frames stream through as their bytes arrive, whatever their length', () => {
  const filter = new ClientFrameFilter();
  filter.push(Buffer.concat([connectionStart(), frame(HEADERS, END_HEADERS, 1, encodeFields(clientEncoder(), requestFields(SOCKET_AUTHORITY)))]));
  assert.equal(filter.mode, 'rewrite');
  const payload = Buffer.alloc(100_000, 0x5a); // above 16384: the server, not the filter, enforces its max frame size
  const data = frame(DATA, END_STREAM, 1, payload);
  const first = Buffer.concat(filter.push(data.subarray(0, 5000)));
  assert.ok(first.equals(data.subarray(0, 5000)), 'forwarded before the frame is complete');
  assert.ok(Buffer.concat([first, ...filter.push(data.subarray(5000))]).equals(data));
});

test('frameHeaderBlock frames an empty block as one HEADERS frame', () => {
  assert.ok(frameHeaderBlock(9, true, Buffer.alloc(0)).equals(frame(HEADERS, END_HEADERS | END_STREAM, 9)));
});

test('malformed input is rejected with InvalidArgument', () => {
  const start = connectionStart();
  const good = encodeFields(clientEncoder(), requestFields(SOCKET_AUTHORITY));
  const cases: Array<[string, Buffer]> = [
    ['no preface', Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n')],
    ['stray CONTINUATION', Buffer.concat([start, frame(CONTINUATION, END_HEADERS, 1, good)])],
    ['DATA inside a header block', Buffer.concat([start, frame(HEADERS, 0, 1, good), frame(DATA, 0, 1)])],
    ['CONTINUATION on another stream', Buffer.concat([start, frame(HEADERS, 0, 1, good), frame(CONTINUATION, END_HEADERS, 3)])],
    ['HEADERS on stream 0', Buffer.concat([start, frame(HEADERS, END_HEADERS, 0, good)])],
    ['padding longer than the frame', Buffer.concat([start, frame(HEADERS, END_HEADERS | PADDED, 1, Buffer.from([200, 1, 2]))])],
    ['priority fields cut short', Buffer.concat([start, frame(HEADERS, END_HEADERS | PRIORITY, 1, Buffer.from([0, 0]))])],
    ['HPACK index out of range', Buffer.concat([start, frame(HEADERS, END_HEADERS, 1, Buffer.from([0xff, 0x7f]))])],
    ['truncated HPACK string', Buffer.concat([start, frame(HEADERS, END_HEADERS, 1, good.subarray(0, good.length - 3))])],
    ['table size update above the limit', Buffer.concat([start, frame(HEADERS, END_HEADERS, 1, Buffer.concat([tableSizeUpdate(1 << 20), good]))])],
    ['header frame over the size bound', Buffer.concat([start, frame(HEADERS, 0, 1).subarray(0, 9).fill(0xff, 0, 3)])],
  ];
  for (const [name, input] of cases) {
    assert.throws(() => run(input), InvalidArgument, name);
  }
});

/** A client connection whose far end the test plays: push() feeds the filter, `written` holds what it wrote. */
function fakeClient(): { client: Duplex; written: Buffer[] } {
  const written: Buffer[] = [];
  const client = new Duplex({
    read() {},
    write(chunk: Buffer, _encoding, callback) {
      written.push(chunk);
      callback();
    },
  });
  return { client, written };
}

test('filterAuthority forwards rewritten client bytes and server bytes untouched', async () => {
  const { client, written } = fakeClient();
  const server = filterAuthority(client);
  client.push(Buffer.concat([connectionStart(), unaryCall(1, encodeFields(clientEncoder(), requestFields(SOCKET_AUTHORITY)))]));
  client.push(null);
  const received: Buffer[] = [];
  server.on('data', (b: Buffer) => received.push(b));
  await once(server, 'end');
  assert.deepEqual(serverView(Buffer.concat(received)).requests[0]!.fields, withAuthority(requestFields(SOCKET_AUTHORITY), 'localhost'));

  const reply = [Buffer.from('arbitrary server bytes \x00\xff', 'latin1'), Buffer.alloc(100_000, 1)];
  server.write(reply[0]);
  server.end(reply[1]);
  await once(client, 'finish');
  assert.ok(Buffer.concat(written).equals(Buffer.concat(reply)));
});

test('filterAuthority closes the connection on a malformed frame', async () => {
  const { client } = fakeClient();
  const server = filterAuthority(client);
  server.resume();
  client.push(Buffer.concat([connectionStart(), frame(CONTINUATION, END_HEADERS, 1)]));
  await Promise.all([once(server, 'close'), once(client, 'close')]);
  assert.ok(server.destroyed && client.destroyed);
});

test('filterAuthority: destroying the returned stream closes the client, and the other way round', async () => {
  {
    const { client } = fakeClient();
    filterAuthority(client).destroy();
    await once(client, 'close');
  }
  {
    const { client } = fakeClient();
    const server = filterAuthority(client);
    client.destroy();
    await once(server, 'close');
  }
});

test('filterAuthority applies backpressure to the client when the server does not read', async () => {
  const { client } = fakeClient();
  const server = filterAuthority(client);
  const input = Buffer.concat([connectionStart(), unaryCall(1, encodeFields(clientEncoder(), requestFields('localhost'))), Buffer.alloc(1 << 20)]);
  client.push(input);
  await new Promise((r) => setImmediate(r));
  assert.ok(client.isPaused(), 'client paused while the server side is full');
  let total = 0;
  server.on('data', (b: Buffer) => { total += b.length; });
  await new Promise((r) => setImmediate(r));
  assert.equal(total, input.length);
  assert.ok(!client.isPaused(), 'client resumed once the server reads');
  server.destroy();
});

test('filterAuthority holds back the server when the client socket is full', async () => {
  let release: (() => void) | null = null;
  const written: Buffer[] = [];
  const client = new Duplex({
    read() {},
    highWaterMark: 1024,
    write(chunk: Buffer, _encoding, callback) {
      written.push(chunk);
      release = () => callback();
    },
  });
  const server = filterAuthority(client);
  let writes = 1;
  while (server.write(Buffer.alloc(4096)) && writes < 100) writes++;
  assert.ok(writes < 100, 'server.write() reports backpressure while the client is stuck');
  let drained = false;
  server.once('drain', () => { drained = true; });
  await new Promise((r) => setImmediate(r));
  assert.equal(drained, false, 'the server waits while the client is slow');
  while (release) {
    const r: () => void = release;
    release = null;
    r();
    await new Promise((resolve) => setImmediate(resolve));
  }
  assert.equal(drained, true);
  assert.equal(Buffer.concat(written).length, writes * 4096);
  server.destroy();
});
