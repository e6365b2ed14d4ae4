import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, connect, type Socket } from 'node:net';
import { Duplex } from 'node:stream';
import * as zlib from 'node:zlib';
import { describe, it } from 'node:test';
import { adler32Of } from '../../support/adler32.js';
import {
  decodeHeaderBlock, encodeData, encodeHeaderBlock, encodePing, encodeRstStream, encodeSynStream, FLAG_FIN, FrameReader, FrameTooLarge,
  HEADER_DICTIONARY, HeaderBlockTooLarge, SpdyProtocolError,
} from '../../../streaming/spdy-frames.js';
import { MAX_HEADER_BLOCK_BYTES, SpdySession, type SpdyStream } from '../../../streaming/spdy.js';

/** A SYN_STREAM whose header block is ~2 KB on the wire and 2 MiB once inflated. */
function headerBomb(id: number): Buffer {
  const block = encodeHeaderBlock({ streamtype: 'error', x: 'a'.repeat(2 << 20) });
  return encodeSynStream(id, zlib.deflateSync(block, { dictionary: HEADER_DICTIONARY, finishFlush: zlib.constants.Z_SYNC_FLUSH }));
}

async function socketPair(): Promise<[Socket, Socket, () => void]> {
  const srv = createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const port = (srv.address() as { port: number }).port;
  const accepted = once(srv, 'connection') as Promise<[Socket]>;
  const c = connect(port, '127.0.0.1');
  const [s] = await accepted;
  return [c, s, () => { c.destroy(); s.destroy(); srv.close(); }];
}

function readAll(s: SpdyStream): Promise<string> {
  const parts: Buffer[] = [];
  s.on('data', (b: Buffer) => parts.push(b));
  return once(s, 'end').then(() => Buffer.concat(parts).toString());
}

describe('SPDY frames', () => {
  it('builds the SPDY/3 dictionary byte for byte (length and zlib dictionary id)', () => {
    assert.equal(HEADER_DICTIONARY.length, 1423);
    assert.equal(HEADER_DICTIONARY.subarray(0, 11).toString('latin1'), '\0\0\0\x07options');
    assert.ok(HEADER_DICTIONARY.toString('latin1').endsWith('utf-,*,enq=0.'));
    // The id zlib puts in a stream compressed with this dictionary (FDICT); Go and Chromium peers check it.
    assert.equal(adler32Of(HEADER_DICTIONARY).toString(16), 'e3c6a7c2');
  });

  it('round-trips header blocks, joining repeated names with NUL', () => {
    const block = encodeHeaderBlock({ streamtype: 'stdout', Port: '80' });
    assert.deepEqual(decodeHeaderBlock(block), { streamtype: 'stdout', port: '80' });
    assert.throws(() => decodeHeaderBlock(block.subarray(0, block.length - 1)), SpdyProtocolError);
  });

  it('reassembles frames split anywhere across reads, and keeps a partial one for the next read', () => {
    const bytes = Buffer.concat([encodeData(3, Buffer.from('hi'), true), encodePing(7), encodeRstStream(5, 5)]);
    const whole = new FrameReader().push(bytes.subarray(0, bytes.length - 3));
    assert.deepEqual(whole.frames.map((f) => f.type), ['data', 'ping']);
    const d = whole.frames[0]!;
    assert.ok(d.type === 'data' && d.streamId === 3 && d.flags === FLAG_FIN && d.data.toString() === 'hi');
    // Every split point, and a byte at a time.
    for (let cut = 1; cut < bytes.length; cut++) {
      const r = new FrameReader();
      const frames = [...r.push(bytes.subarray(0, cut)).frames, ...r.push(bytes.subarray(cut)).frames];
      assert.deepEqual(frames.map((f) => f.type), ['data', 'ping', 'rst_stream'], `cut at ${cut}`);
      assert.equal(r.buffered, 0);
    }
    const r = new FrameReader();
    const oneByOne = [...bytes].flatMap((b) => r.push(Buffer.from([b])).frames);
    assert.deepEqual(oneByOne.map((f) => f.type), ['data', 'ping', 'rst_stream']);
    assert.match(String(new FrameReader().push(Buffer.from([0x80, 0x02, 0, 1, 0, 0, 0, 0])).error), /version 2/);
  });

  it('refuses a frame over the limit from its header alone, keeping the frames before it, and takes nothing after', () => {
    const r = new FrameReader(50);
    const big = encodeData(1, Buffer.alloc(100), false);
    const { frames, error } = r.push(Buffer.concat([encodePing(1), big.subarray(0, 8)]));
    assert.deepEqual(frames.map((f) => f.type), ['ping']);
    assert.ok(error instanceof FrameTooLarge && error.length === 100 && error.limit === 50);
    assert.ok(r.push(encodePing(3)).error instanceof FrameTooLarge);
    assert.equal(r.push(encodePing(3)).frames.length, 0);
  });

  it('reassembles a frame of many small reads in linear time: each byte copied once', () => {
    // 1 MiB in 1 KiB reads: with the old concatenate-per-read this copied ~512 MiB.
    const payload = Buffer.alloc(1 << 20, 7);
    const frame = encodeData(1, payload, false);
    const r = new FrameReader(1 << 20);
    const copy = Buffer.prototype.copy;
    let copied = 0;
    Buffer.prototype.copy = function (this: Buffer, ...args: Parameters<Buffer['copy']>) {
      const n = copy.apply(this, args);
      copied += n;
      return n;
    };
    let frames: ReturnType<FrameReader['push']>['frames'] = [];
    try {
      for (let off = 0; off < frame.length; off += 1024) frames = frames.concat(r.push(frame.subarray(off, off + 1024)).frames);
    } finally {
      Buffer.prototype.copy = copy;
    }
    assert.equal(frames.length, 1);
    assert.ok(frames[0]!.type === 'data' && frames[0]!.data.equals(payload));
    assert.ok(copied <= frame.length + 8, `copied ${copied} bytes for a frame of ${frame.length}`);
  });
});

describe('SPDY session', () => {
  it('opens streams, replies, exchanges data both ways with half-close', async () => {
    const [a, b, cleanup] = await socketPair();
    try {
      const client = new SpdySession(a, { client: true });
      const server = new SpdySession(b, { client: false });
      server.on('stream', (s) => {
        void s.reply();
        void readAll(s).then((text) => s.end(`echo:${s.headers.streamtype}:${text}`));
      });
      // Several streams with compressed headers in flight at once: the shared zlib contexts stay in step.
      const streams = await Promise.all(['stdin', 'stdout', 'error'].map((t) => client.openStream({ streamtype: t })));
      assert.deepEqual(streams.map((s) => s.id), [1, 3, 5]);
      const answers = streams.map((s) => readAll(s));
      streams.forEach((s, i) => s.end('x'.repeat(i * 40_000)));
      const got = await Promise.all(answers);
      assert.equal(got[0], 'echo:stdin:');
      assert.equal(got[1], `echo:stdout:${'x'.repeat(40_000)}`);
      assert.equal(got[2]!.length, 'echo:error:'.length + 80_000);
      const closed = once(server, 'close');
      await client.close();
      await closed;
    } finally {
      cleanup();
    }
  });

  it('closes the session on a header block inflating past the cap: failure, GOAWAY, close', { timeout: 10_000 }, async () => {
    const [a, b, cleanup] = await socketPair();
    try {
      const server = new SpdySession(b, { client: false });
      server.on('stream', () => assert.fail('a stream from a header bomb was accepted'));
      const failure = once(server, 'failure') as Promise<[SpdyProtocolError]>;
      const closed = once(server, 'close');
      const fromServer: Buffer[] = [];
      a.on('data', (d: Buffer) => fromServer.push(d));
      const bomb = headerBomb(1);
      assert.ok(bomb.length < 4096, `the bomb is ${bomb.length} bytes`);
      a.write(bomb);
      const [err] = await failure;
      assert.ok(err instanceof HeaderBlockTooLarge && err.limit === MAX_HEADER_BLOCK_BYTES);
      assert.match(err.message, /header block expands past the limit of 65536 bytes/);
      await closed;
      await once(a, 'end');
      const frames = new FrameReader().push(Buffer.concat(fromServer)).frames;
      assert.deepEqual(frames.map((f) => f.type), ['goaway']);
    } finally {
      cleanup();
    }
  });

  it('ends within its grace when the peer hangs up, even while a frame it sent is never done being handled', { timeout: 10_000 }, async () => {
    // A peer that never reads: the answer to its ping never gets written, so that frame is never done.
    const socket = new Duplex({ read() { /* fed by push */ }, write() { /* never completes */ } });
    const session = new SpdySession(socket, { client: false });
    const closed = once(session, 'close');
    socket.push(encodePing(1));
    socket.push(null);
    await closed;
    assert.equal(session.isClosed, true);
    socket.destroy();
  });
});
