// Binds a CRI service definition to our handlers; every method without a handler answers UNIMPLEMENTED.
import type * as grpc from '@grpc/grpc-js';
import { Unimplemented } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { ImageServiceHandlers } from '../gen/runtime/v1/ImageService.js';
import type { RuntimeServiceHandlers } from '../gen/runtime/v1/RuntimeService.js';
import { serverStream, unary, unimplemented, type RpcObserver, type ServerStream, type Unary } from './rpc.js';

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
 */
export function afterStart<H>(definition: grpc.ServiceDefinition, ready: Promise<HandlerMap<H>>, now: HandlerMap<H>): HandlerMap<H> {
  let handlers: HandlerTable | undefined;
  const started = ready.then((h) => (handlers = h as HandlerTable));
  // No call may be waiting when a start fails: that rejection is the start's to report, not an unhandled one.
  started.catch(() => undefined);
  const real = async (name: string) => {
    const handler = (handlers ?? await started)[name];
    if (!handler) throw new Unimplemented(`${definition[name]!.path.slice(1)} is not implemented by minicri yet`);
    return handler;
  };
  const gated: HandlerTable = { ...now as HandlerTable };
  for (const [name, method] of Object.entries(definition)) {
    if (gated[name]) continue;
    const stream: AnyStream = async (req, emit, ctx, flow) => ((await real(name)) as AnyStream)(req, emit, ctx, flow);
    const unary: AnyUnary = async (req, ctx) => ((await real(name)) as AnyUnary)(req, ctx);
    gated[name] = method.responseStream ? stream : unary;
  }
  return gated as HandlerMap<H>;
}
