// The handlers the daemon binds before its start has ended (afterStart): Version answers at once, every other
// call waits for the real handlers, a method without one is UNIMPLEMENTED, and a failed start fails the calls
// that waited with its error.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DeadlineExceeded } from '../../../core/errors.js';
import { silentLogger } from '../../../core/log.js';
import type { RuntimeServiceHandlers } from '../../../gen/runtime/v1/RuntimeService.js';
import { loadCri } from '../../../server/proto.js';
import type { CallContext, ServerStream, Unary } from '../../../server/rpc.js';
import { afterStart, type HandlerMap } from '../../../server/service.js';

type Handlers = HandlerMap<RuntimeServiceHandlers>;
const definition = loadCri().RuntimeService.service;
const ctx: CallContext = { log: silentLogger, signal: new AbortController().signal };
const call = (h: Handlers, name: keyof Handlers, req: unknown = {}) => Promise.resolve((h[name] as Unary<unknown, unknown>)(req, ctx));

function deferred(): { promise: Promise<Handlers>; resolve: (h: Handlers) => void; reject: (e: unknown) => void } {
  let resolve!: (h: Handlers) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<Handlers>((res, rej) => { resolve = res; reject = rej; });
  return { promise, resolve, reject };
}

/** Whether `p` has settled after the pending callbacks ran. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(() => { done = true; }, () => { done = true; });
  await new Promise((r) => setImmediate(r));
  return done;
}

test('Version answers before the start has ended; other calls wait for it, then get the real handlers', async () => {
  const ready = deferred();
  const h = afterStart<RuntimeServiceHandlers>(definition, ready.promise, { Version: () => ({ version: 'now' }) });
  assert.deepEqual(await call(h, 'Version'), { version: 'now' });
  const status = call(h, 'Status', { verbose: true });
  assert.equal(await settled(status), false, 'Status answered before the start ended');
  ready.resolve({ Status: (req: unknown) => ({ asked: req }) } as Handlers);
  assert.deepEqual(await status, { asked: { verbose: true } });
  assert.deepEqual(await call(h, 'Status', {}), { asked: {} });
});

test('a method the started service lacks is UNIMPLEMENTED, by its full name', async () => {
  const ready = deferred();
  const h = afterStart<RuntimeServiceHandlers>(definition, ready.promise, {});
  ready.resolve({});
  await assert.rejects(call(h, 'Status'), (err: Error) => err.name === 'Unimplemented'
    && err.message === 'runtime.v1.RuntimeService/Status is not implemented by minicri yet');
});

test('a failed start fails the waiting calls, streams included, with its own error', async () => {
  const ready = deferred();
  const h = afterStart<RuntimeServiceHandlers>(definition, ready.promise, {});
  const status = call(h, 'Status');
  const events = (h.GetContainerEvents as ServerStream<unknown, unknown>)({}, () => true, ctx,
    { drained: async () => undefined, cancelled: new AbortController().signal, sendHeaders: () => undefined });
  ready.reject(new Error('cannot serve metrics'));
  await assert.rejects(status, /cannot serve metrics/);
  await assert.rejects(events, /cannot serve metrics/);
});

test('a waiting caller that gives up leaves at once, and the started handler never runs for it', { timeout: 10_000 }, async () => {
  const ready = deferred();
  const h = afterStart<RuntimeServiceHandlers>(definition, ready.promise, {});
  const caller = new AbortController();
  let ran = 0;
  const run = Promise.resolve((h.RunPodSandbox as Unary<unknown, unknown>)({}, { log: silentLogger, signal: caller.signal }));
  caller.abort(new DeadlineExceeded('RunPodSandbox: the client\'s deadline passed'));
  await assert.rejects(run, (err: Error) => err instanceof DeadlineExceeded);
  ready.resolve({ RunPodSandbox: () => { ran++; return {}; } } as Handlers);
  await ready.promise;
  assert.equal(ran, 0);
});

test('a caller whose deadline passed during the start is refused once it ends, before its signal fires', { timeout: 10_000 }, async () => {
  const ready = deferred();
  const h = afterStart<RuntimeServiceHandlers>(definition, ready.promise, {});
  let ran = 0;
  const late: CallContext = { log: silentLogger, signal: new AbortController().signal, deadline: Date.now() - 1 };
  const run = Promise.resolve((h.RunPodSandbox as Unary<unknown, unknown>)({}, late));
  ready.resolve({ RunPodSandbox: () => { ran++; return {}; } } as Handlers);
  await assert.rejects(run, (err: Error) => err instanceof DeadlineExceeded && /deadline passed while minicri was starting/.test(err.message));
  assert.equal(ran, 0);
  // Once started, the handlers answer directly: the deadline is theirs to judge.
  await call(h, 'RunPodSandbox');
  assert.equal(ran, 1);
});
