import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  parseCriLogEntry, parseCriLog, joinCriLogEntries, formatRfc3339Nano, formatCriLogEntry, formatCriLog,
} from '../../../oci/runtime/logs.js';
import { InvalidArgument } from '../../../core/errors.js';

test('parses the lines conmon writes, keeping the nanosecond timestamp text', () => {
  const e = parseCriLogEntry('2026-11-22T06:09:26.550284735+00:00 stdout F hello world');
  assert.equal(e.timestamp, '2026-11-22T06:09:26.550284735+00:00');
  assert.equal(e.time.toISOString(), '2026-11-22T06:09:26.550Z');
  assert.equal(e.stream, 'stdout');
  assert.equal(e.partial, false);
  assert.equal(e.content, 'hello world');
});

test('parses Z timestamps, partial tags, extra tags, empty and space-only content', () => {
  assert.equal(parseCriLogEntry('2026-01-02T03:04:05Z stderr P abc').partial, true);
  assert.equal(parseCriLogEntry('2026-01-02T03:04:05.1Z stdout F:x y').content, 'y');
  assert.equal(parseCriLogEntry('2026-01-02T03:04:05.1Z stdout F ').content, '');
  assert.equal(parseCriLogEntry('2026-01-02T03:04:05.1Z stdout F').content, '');
  assert.equal(parseCriLogEntry('2026-01-02T03:04:05.1Z stdout F   two spaces').content, '  two spaces');
});

test('rejects malformed entries with InvalidArgument', () => {
  for (const bad of ['', 'garbage', 'yesterday stdout F x', '2026-01-02T03:04:05Z stdin F x', '2026-01-02T03:04:05Z stdout X x', '2026-13-45T03:04:05Z stdout F x']) {
    assert.throws(() => parseCriLogEntry(bad), InvalidArgument, bad);
  }
});

test('parseCriLog splits a file and joins P…F runs per stream', () => {
  const text = [
    '2026-01-02T03:04:05.000000001Z stdout P ab',
    '2026-01-02T03:04:05.000000002Z stderr F err',
    '2026-01-02T03:04:05.000000003Z stdout P cd',
    '2026-01-02T03:04:05.000000004Z stdout F ef',
    '2026-01-02T03:04:05.000000005Z stdout P tail',
    '',
  ].join('\n');
  const entries = parseCriLog(text);
  assert.equal(entries.length, 5);
  assert.deepEqual(joinCriLogEntries(entries).map((l) => [l.stream, l.content, l.complete]), [
    ['stderr', 'err', true],
    ['stdout', 'abcdef', true],
    ['stdout', 'tail', false],
  ]);
  assert.deepEqual(parseCriLog(''), []);
});

test('formats RFC 3339 timestamps with nine fraction digits in UTC', () => {
  const d = new Date('2026-01-02T03:04:05.678Z');
  assert.equal(formatRfc3339Nano(d), '2026-01-02T03:04:05.678000000Z');
  assert.equal(formatRfc3339Nano(d, 5), '2026-01-02T03:04:05.000000005Z');
  assert.throws(() => formatRfc3339Nano(d, 1e9), InvalidArgument);
  assert.throws(() => formatRfc3339Nano(new Date(NaN)), InvalidArgument);
});

test('formatted entries parse back to the same values', () => {
  const time = new Date('2026-01-02T03:04:05.678Z');
  const line = formatCriLogEntry({ time, nanos: 678123456, stream: 'stderr', partial: true, content: 'x y' });
  assert.equal(line, '2026-01-02T03:04:05.678123456Z stderr P x y\n');
  const e = parseCriLogEntry(line.slice(0, -1));
  assert.deepEqual([e.stream, e.partial, e.content, e.time.getTime()], ['stderr', true, 'x y', time.getTime()]);
  assert.throws(() => formatCriLogEntry({ time, stream: 'stdout', partial: false, content: 'a\nb' }), InvalidArgument);
});

test('formatCriLog splits long lines into P…F without cutting characters, torn tail stays P', () => {
  const time = new Date('2026-01-02T03:04:05Z');
  const out = formatCriLog('stdout', 'short\n' + 'é'.repeat(5) + '\nrest', time, 4);
  const entries = parseCriLog(out);
  assert.deepEqual(entries.map((e) => [e.partial, e.content]), [
    [true, 'shor'], [false, 't'],
    [true, 'éé'], [true, 'éé'], [false, 'é'],
    [true, 'rest'],
  ]);
  assert.deepEqual(joinCriLogEntries(entries).map((l) => l.content), ['short', 'ééééé', 'rest']);
  assert.equal(formatCriLog('stdout', '', time), '');
  assert.equal(parseCriLog(formatCriLog('stderr', '\n', time))[0]!.content, '');
  assert.throws(() => formatCriLog('stdout', 'x', time, 2), InvalidArgument);
});
