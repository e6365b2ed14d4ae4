import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, connect, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { adler32Of } from '../../support/adler32.js';
import {
  decodeHeaderBlock, encodeData, encodeHeaderBlock, encodePing, encodeRstStream, FLAG_FIN, HEADER_DICTIONARY, parseFrames, SpdyProtocolError,
} from '../../../streaming/spdy-frames.js';
import { SpdySession, type SpdyStream } from '../../../streaming/spdy.js';

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

  it('splits whole frames off a buffer and keeps the partial rest', () => {
    const bytes = Buffer.concat([encodeData(3, Buffer.from('hi'), true), encodePing(7), encodeRstStream(5, 5)]);
    const { frames, rest } = parseFrames(bytes.subarray(0, bytes.length - 3));
    assert.deepEqual(frames.map((f) => f.type), ['data', 'ping']);
    assert.equal(rest.length, 13);
    const d = frames[0]!;
    assert.ok(d.type === 'data' && d.streamId === 3 && d.flags === FLAG_FIN && d.data.toString() === 'hi');
    assert.throws(() => parseFrames(Buffer.from([0x80, 0x02, 0, 1, 0, 0, 0, 0])), /version 2/);
    assert.throws(() => parseFrames(encodeData(1, Buffer.alloc(100), false), 50), /exceeds/);
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
});
