import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Cancelled } from '../../../core/errors.js';
import { retry } from '../../../core/retry.js';

const transient = () => new Error('connection reset');

test('a failing call is tried `attempts` times, the last failure is thrown, and each retry is reported first', async () => {
  const tried: number[] = [];
  const reported: number[] = [];
  const last = new Error('third');
  await assert.rejects(retry(async (attempt) => { tried.push(attempt); throw attempt === 3 ? last : transient(); }, {
    attempts: 3, backoffMs: 1, retryable: () => true, onRetry: (_err, attempt) => { reported.push(attempt); },
  }), (e) => e === last);
  assert.deepEqual(tried, [1, 2, 3]);
  assert.deepEqual(reported, [1, 2]);
});

test('a call that succeeds on a later attempt returns its value', async () => {
  let calls = 0;
  const v = await retry(async () => { if (++calls < 2) throw transient(); return 'ok'; }, { attempts: 3, backoffMs: 1, retryable: () => true });
  assert.equal(v, 'ok');
  assert.equal(calls, 2);
});

test('a failure the predicate does not retry is thrown at once', async () => {
  let calls = 0;
  const fatal = new Error('refused');
  await assert.rejects(retry(async () => { calls++; throw calls === 1 ? transient() : fatal; }, {
    attempts: 5, backoffMs: 1, retryable: (e) => e !== fatal,
  }), (e) => e === fatal);
  assert.equal(calls, 2);
});

test('an abort during the backoff ends it with the signal\'s reason, without another try', { timeout: 10_000 }, async () => {
  const controller = new AbortController();
  const reason = new Cancelled('the client gave up');
  let calls = 0;
  // The backoff is far longer than the test may run: only the abort can end it.
  const run = retry(async () => { calls++; throw transient(); }, {
    attempts: 3, backoffMs: 3_600_000, retryable: () => true, signal: controller.signal,
    onRetry: () => { setImmediate(() => controller.abort(reason)); },
  });
  await assert.rejects(run, (e) => e === reason);
  assert.equal(calls, 1);
});

test('a failure after the signal aborted is explained by the signal\'s reason, not retried', async () => {
  const controller = new AbortController();
  const reason = new Cancelled('stop');
  let calls = 0;
  await assert.rejects(retry(async () => { calls++; controller.abort(reason); throw transient(); }, {
    attempts: 3, backoffMs: 1, retryable: () => true, signal: controller.signal,
  }), (e) => e === reason);
  assert.equal(calls, 1);
});
