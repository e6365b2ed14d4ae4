// The server edge: turns plain async handlers into grpc-js handlers that log each call and map
// thrown errors to gRPC statuses. Nothing a handler throws can take the daemon down.
import { randomBytes } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { Cancelled, DeadlineExceeded, Unimplemented } from '../core/errors.js';
import { toGrpcError } from './grpc-status.js';
import type { Logger } from '../core/log.js';
import { timerDelay } from '../core/time.js';

/** What a handler gets beside its request: a logger carrying the rpc name and request id. */
export interface CallContext {
  log: Logger;
  /**
   * Aborts when the client cancels the call or its deadline passes, for the few operations that stop then
   * (a pull: nothing is left half done by stopping it). Its reason is a DeadlineExceeded.
   */
  signal: AbortSignal;
  /** When the client's deadline passes (Unix ms), undefined for a call without one (a few RPCs require one). */
  readonly deadline?: number | undefined;
}

export type Unary<Req, Res> = (request: Req, ctx: CallContext) => Promise<Res> | Res;
export type ServerStream<Req, Res> =
  (request: Req, emit: (response: Res) => boolean, ctx: CallContext, stream: StreamFlow) => Promise<void>;

/** What a long or large server stream needs beside `emit`: the client's pace and its leaving. */
export interface StreamFlow {
  /**
   * Resolves once what was emitted has gone out (at once when nothing waits), or when the call ends: wait for
   * it after `emit` returned false, so a client that reads slowly is not buffered for without bound.
   */
  drained(): Promise<void>;
  /** Aborted when the client cancels the call or goes away. */
  readonly cancelled: AbortSignal;
  /** Sends the response headers now rather than with the first message: tells the client the stream is in place. */
  sendHeaders(): void;
}

/** The flow control of a grpc-js server stream. */
function streamFlow(call: grpc.ServerWritableStream<unknown, unknown>): StreamFlow {
  const cancel = new AbortController();
  call.once('cancelled', () => cancel.abort());
  call.once('close', () => cancel.abort());
  return {
    cancelled: cancel.signal,
    sendHeaders: () => call.sendMetadata(new grpc.Metadata()),
    drained: () => new Promise<void>((resolve) => {
      if (!call.writableNeedDrain || cancel.signal.aborted) return resolve();
      const done = () => { call.off('drain', done); cancel.signal.removeEventListener('abort', done); resolve(); };
      call.once('drain', done);
      cancel.signal.addEventListener('abort', done, { once: true });
    }),
  };
}

/** Counts one finished call of `rpc` with its gRPC status name ("OK", "NOT_FOUND", ...). */
export type RpcObserver = (rpc: string, code: string) => void;

type GrpcUnary = grpc.handleUnaryCall<unknown, unknown>;
type GrpcServerStream = grpc.handleServerStreamingCall<unknown, unknown>;

/** The ids worth carrying on every log line of a call, taken from its request. */
function idsOf(request: unknown): Record<string, string> {
  const ids: Record<string, string> = {};
  if (request && typeof request === 'object') {
    const r = request as Record<string, unknown>;
    if (typeof r.pod_sandbox_id === 'string' && r.pod_sandbox_id) ids.sandboxId = r.pod_sandbox_id;
    if (typeof r.container_id === 'string' && r.container_id) ids.containerId = r.container_id;
  }
  return ids;
}

/**
 * Most operations run to the end even when the caller gives up (a half-done RunPodSandbox would leave more
 * behind than a finished one); those that can stop cleanly read `signal`.
 */
function callContext(
  name: string,
  call: grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerWritableStream<unknown, unknown>,
  log: Logger,
): CallContext {
  // Most calls log nothing at the default level (a relist is hundreds of them): the call's child logger,
  // its request id and its signal are made on first use.
  let child: Logger | undefined;
  let signal: AbortSignal | undefined;
  return {
    get log() { return child ??= log.child({ rpc: name, req: randomBytes(4).toString('hex'), ...idsOf(call.request) }); },
    get signal() { return signal ??= callSignal(name, call); },
    get deadline() { return deadlineOf(call); },
  };
}

function deadlineOf(call: grpc.ServerUnaryCall<unknown, unknown>): number | undefined {
  const deadline = call.getDeadline();
  const at = deadline instanceof Date ? deadline.getTime() : deadline;
  return Number.isFinite(at) ? at : undefined;
}

// A streaming call is a unary call's surface and more: typed as the one, it takes both (their union's event methods
// are not callable).
function callSignal(name: string, call: grpc.ServerUnaryCall<unknown, unknown>): AbortSignal {
  const controller = new AbortController();
  const deadlineAt = deadlineOf(call) ?? Infinity;
  const ms = deadlineAt - Date.now();
  // grpc-js says 'cancelled' for both: a call whose deadline has come is over its time, any other was given up.
  const cancelled = () => controller.abort(Date.now() >= deadlineAt
    ? new DeadlineExceeded(`${name}: the client's deadline passed`)
    : new Cancelled(`${name}: the client cancelled the call`));
  if (call.cancelled) cancelled();
  call.once('cancelled', cancelled);
  if (!Number.isFinite(ms)) return controller.signal;
  // A timer (unref'd) rather than trusting the transport: the deadline is the client's promise to stop waiting.
  const timer = setTimeout(() => controller.abort(new DeadlineExceeded(`${name}: the client's deadline passed`)), timerDelay(ms));
  timer.unref();
  controller.signal.addEventListener('abort', () => clearTimeout(timer), { once: true });
  call.once('finish', () => clearTimeout(timer));
  return controller.signal;
}

/** Logs how a call ended, counts it with `observe` (the metrics, when on), and gives grpc-js its error. */
function logOutcome(
  name: string, ctx: CallContext, parent: Logger, observe: RpcObserver | undefined, started: bigint, err?: unknown,
): grpc.ServiceError | null {
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  if (err === undefined) {
    if (parent.isLevelEnabled('debug')) ctx.log.debug({ ms }, 'ok');
    observe?.(name, 'OK');
    return null;
  }
  const { code, details } = toGrpcError(err);
  const level = code === grpc.status.INTERNAL || code === grpc.status.UNKNOWN ? 'error' : 'warn';
  ctx.log[level]({ ms, code: grpc.status[code], err: err instanceof Error ? err : String(err) }, details);
  observe?.(name, grpc.status[code]);
  return Object.assign(new Error(details), { code, details, metadata: new grpc.Metadata() });
}

export function unary<Req, Res>(name: string, handler: Unary<Req, Res>, log: Logger, observe?: RpcObserver): GrpcUnary {
  return (call, callback) => {
    const started = process.hrtime.bigint();
    const ctx = callContext(name, call, log);
    Promise.resolve()
      .then(() => handler(call.request as Req, ctx))
      .then(
        (response) => callback(logOutcome(name, ctx, log, observe, started), response),
        (err: unknown) => callback(logOutcome(name, ctx, log, observe, started, err)),
      );
  };
}

export function serverStream<Req, Res>(
  name: string, handler: ServerStream<Req, Res>, log: Logger, observe?: RpcObserver,
): GrpcServerStream {
  return (call) => {
    const started = process.hrtime.bigint();
    const ctx = callContext(name, call, log);
    Promise.resolve()
      .then(() => handler(call.request as Req, (response) => call.write(response), ctx, streamFlow(call)))
      .then(
        () => { logOutcome(name, ctx, log, observe, started); call.end(); },
        // grpc-js sends an 'error' as the call's status and ends it; destroy() would drop the status, and the
        // client would wait on an open stream for good.
        (err: unknown) => { call.emit('error', logOutcome(name, ctx, log, observe, started, err)); },
      );
  };
}

/** A grpc-js handler for a method no issue has implemented yet: UNIMPLEMENTED, naming the method. */
export function unimplemented(
  service: string, name: string, log: Logger, streaming: boolean, observe?: RpcObserver,
): GrpcUnary | GrpcServerStream {
  const fail = () => { throw new Unimplemented(`${service}/${name} is not implemented by minicri yet`); };
  return streaming ? serverStream(name, async () => fail(), log, observe) : unary(name, fail, log, observe);
}
