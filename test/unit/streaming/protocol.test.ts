import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  decodeChannelMessage, encodeChannelMessage, encodeStatus, exitCodeStatus, negotiate, parsePorts, portPrefix, protocolVersion, ResizeDecoder,
  SPDY_EXEC_PROTOCOLS, successStatus, WS_EXEC_PROTOCOLS,
} from '../../../streaming/protocol.js';
import { expectedStreams } from '../../../streaming/remote-command.js';
import { TokenCache } from '../../../streaming/tokens.js';

describe('protocol negotiation', () => {
  it('picks our best protocol the client offers, from one header or several', () => {
    assert.equal(negotiate('v4.channel.k8s.io, v3.channel.k8s.io', SPDY_EXEC_PROTOCOLS), 'v4.channel.k8s.io');
    assert.equal(negotiate(['channel.k8s.io', 'v5.channel.k8s.io'], SPDY_EXEC_PROTOCOLS), 'v5.channel.k8s.io');
    assert.equal(negotiate('v4.base64.channel.k8s.io', WS_EXEC_PROTOCOLS), 'v4.base64.channel.k8s.io');
    assert.equal(negotiate('v9.channel.k8s.io', SPDY_EXEC_PROTOCOLS), undefined);
    assert.equal(negotiate(undefined, SPDY_EXEC_PROTOCOLS), undefined);
    assert.equal(protocolVersion('v4.channel.k8s.io'), 4);
    assert.equal(protocolVersion('channel.k8s.io'), 1);
  });

  it('expects the streams kubelet expects for each option set', () => {
    assert.deepEqual(expectedStreams({ stdin: true, stdout: true, stderr: true, tty: false }, 4), ['error', 'stdin', 'stdout', 'stderr']);
    assert.deepEqual(expectedStreams({ stdin: true, stdout: true, stderr: false, tty: true }, 4), ['error', 'stdin', 'stdout', 'resize']);
    assert.deepEqual(expectedStreams({ stdin: false, stdout: true, stderr: false, tty: true }, 2), ['error', 'stdout']);
  });
});

describe('status', () => {
  it('reports a non-zero exit as NonZeroExitCode with an ExitCode cause (v4+), as text before', () => {
    const s = JSON.parse(encodeStatus(exitCodeStatus(['sh', '-c', 'exit 3'], 3), 4).toString());
    assert.equal(s.status, 'Failure');
    assert.equal(s.reason, 'NonZeroExitCode');
    assert.deepEqual(s.details.causes, [{ reason: 'ExitCode', message: '3' }]);
    assert.equal(JSON.parse(encodeStatus(successStatus(), 5).toString()).status, 'Success');
    assert.equal(encodeStatus(successStatus(), 2).length, 0);
    assert.match(encodeStatus(exitCodeStatus(['false'], 1), 3).toString(), /non-zero exit code/);
  });
});

describe('resize decoding', () => {
  it('splits back-to-back JSON objects across chunks and skips bad ones', () => {
    const d = new ResizeDecoder();
    assert.deepEqual(d.push('{"Width":80,"Height":24}{"Width":1'), [{ width: 80, height: 24 }]);
    assert.deepEqual(d.push('00,"Height":40}\n{"Width":-1,"Height":2}{"Width":"x}"}'), [{ width: 100, height: 40 }]);
    assert.deepEqual(d.push('{"Height":5,"Width":7}'), [{ width: 7, height: 5 }]);
  });
});

describe('WebSocket channels', () => {
  it('prefixes the channel as a byte, or as a digit with base64 text', () => {
    const bin = encodeChannelMessage(1, Buffer.from('hi'), false) as Buffer;
    assert.deepEqual([...bin], [1, 104, 105]);
    assert.deepEqual(decodeChannelMessage(bin, false), { channel: 1, data: Buffer.from('hi') });
    const text = encodeChannelMessage(2, Buffer.from('hi'), true);
    assert.equal(text, '2aGk=');
    assert.deepEqual(decodeChannelMessage(text, true), { channel: 2, data: Buffer.from('hi') });
    assert.equal(decodeChannelMessage(Buffer.alloc(0), false), undefined);
    assert.deepEqual([...portPrefix(8080)], [0x90, 0x1f]);
  });

  it('parses port lists and names a bad port', () => {
    assert.deepEqual(parsePorts(['80', '8080,9090']), [80, 8080, 9090]);
    assert.match(parsePorts(['80', '0']) as string, /invalid port "0"/);
    assert.match(parsePorts(['http']) as string, /invalid port "http"/);
  });
});

describe('tokens', () => {
  it('are single-use, expire after the TTL and are bounded', () => {
    let now = 1000;
    const cache = new TokenCache<string>(() => now, 60_000, 2);
    const a = cache.issue('a');
    assert.match(a, /^[A-Za-z0-9_-]{22}$/);
    assert.equal(cache.take(a), 'a');
    assert.equal(cache.take(a), undefined);
    assert.equal(cache.take('made-up'), undefined);
    const b = cache.issue('b');
    assert.equal(cache.peek(b), 'b', 'peeking leaves the token usable');
    cache.issue('c');
    assert.throws(() => cache.issue('d'), /waiting to be used/);
    now += 60_000;
    assert.equal(cache.take(b), undefined);
    assert.equal(cache.size, 0);
  });
});
