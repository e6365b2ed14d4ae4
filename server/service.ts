// Binds a CRI service definition to our handlers; every method without a handler answers UNIMPLEMENTED.
import type * as grpc from '@grpc/grpc-js';
import { DeadlineExceeded, Unimplemented } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { ImageServiceHandlers } from '../gen/runtime/v1/ImageService.js';
import type { RuntimeServiceHandlers } from '../gen/runtime/v1/RuntimeService.js';
import { serverStream, unary, unimplemented, type CallContext, type RpcObserver, type ServerStream, type Unary } from './rpc.js';

/** Drops the index signature grpc-js types carry, leaving the generated method names. */
type KnownKeys<T> = keyof { [K in keyof T as string extends K ? never : K]: T[K] };

/** Our handler shapes for each method of a generated `XxxServiceHandlers` interface. */
export type HandlerMap<H> = {
  [K in KnownKeys<H> & keyof H]?: H[K] extends grpc.handleUnaryCall<infer Req, infer Res>
    ? Unary<Req, Res>
    : H[K] extends grpc.handleServerStreamingCall<infer Req, infer Res>
      ? ServerStream<Req, Res>
      : never;
};

export function bindService<H>(
  serviceName: string,
  definition: grpc.ServiceDefinition,
  handlers: HandlerMap<H>,
  log: Logger,
  /** Counts every call's outcome (the metrics, when they are on). */
  observe?: RpcObserver,
): grpc.UntypedServiceImplementation {
  const implementation: grpc.UntypedServiceImplementation = {};
  const byName = handlers as Record<string, Unary<unknown, unknown> | ServerStream<unknown, unknown> | undefined>;
  for (const [name, method] of Object.entries(definition)) {
    const handler = byName[name];
    if (!handler) implementation[name] = unimplemented(serviceName, name, log, method.responseStream, observe);
    else if (method.responseStream) implementation[name] = serverStream(name, handler as ServerStream<unknown, unknown>, log, observe);
    else implementation[name] = unary(name, handler as Unary<unknown, unknown>, log, observe);
  }
  return implementation;
}

export type RuntimeHandlers = HandlerMap<RuntimeServiceHandlers>;
export type ImageHandlers = HandlerMap<ImageServiceHandlers>;
/** The handler of one RuntimeService method, by its RPC name. */
export type RuntimeRpc<K extends keyof RuntimeHandlers> = NonNullable<RuntimeHandlers[K]>;
/** The handler of one ImageService method, by its RPC name. */
export type ImageRpc<K extends keyof ImageHandlers> = NonNullable<ImageHandlers[K]>;

type AnyUnary = Unary<unknown, unknown>;
type AnyStream = ServerStream<unknown, unknown>;
type HandlerTable = Record<string, AnyUnary | AnyStream | undefined>;

/**
 * The handlers of a service whose real ones exist only once `ready` resolves (the daemon's start, recovery
 * included): each call waits for them, so none is answered from records recovery has not made true yet; those
 * in `now` answer at once. When the start fails, `ready` rejects and the waiting calls fail with its error.
 * A caller that gives up while it waits leaves at once (a hung start piles up no calls), and one whose time ran
 * out during the wait is refused rather than served: its RunPodSandbox would make a pod nobody waits for.
 */
export function afterStart<H>(definition: grpc.ServiceDefinition, ready: Promise<HandlerMap<H>>, now: HandlerMap<H>): HandlerMap<H> {
  let handlers: HandlerTable | undefined;
  const started = ready.then((h) => (handlers = h as HandlerTable));
  // No call may be waiting when a start fails: that rejection is the start's to report, not an unhandled one.
  started.catch(() => undefined);
  const real = async (name: string, ctx: CallContext) => {
    const rpc = definition[name]!.path.slice(1);
    let table = handlers;
    if (!table) {
      table = await untilAborted(started, ctx.signal);
      // The deadline's timer may not have run yet when the start ends (a long synchronous step delays it).
      ctx.signal.throwIfAborted();
      if (ctx.deadline !== undefined && Date.now() >= ctx.deadline) {
        throw new DeadlineExceeded(`${rpc}: the client's deadline passed while minicri was starting`);
      }
    }
    const handler = table[name];
    if (!handler) throw new Unimplemented(`${rpc} is not implemented by minicri yet`);
    return handler;
  };
  const gated: HandlerTable = { ...now as HandlerTable };
  for (const [name, method] of Object.entries(definition)) {
    if (gated[name]) continue;
    const stream: AnyStream = async (req, emit, ctx, flow) => ((await real(name, ctx)) as AnyStream)(req, emit, ctx, flow);
    const unary: AnyUnary = async (req, ctx) => ((await real(name, ctx)) as AnyUnary)(req, ctx);
    gated[name] = method.responseStream ? stream : unary;
  }
  return gated as HandlerMap<H>;
}

/** `p`'s outcome, or the reason of `signal` as soon as it aborts. */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const leave = () => reject(signal.reason as Error);
    signal.addEventListener('abort', leave, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', leave));
  });
}
