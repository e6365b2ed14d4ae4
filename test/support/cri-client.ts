// A small typed CRI client over the same proto as the daemon, for tests and benchmarks.
import * as grpc from '@grpc/grpc-js';
import type { MethodDefinition } from '@grpc/proto-loader';
import type { ImageServiceDefinition } from '../../gen/runtime/v1/ImageService.js';
import type { RuntimeServiceDefinition } from '../../gen/runtime/v1/RuntimeService.js';
import { loadCri } from '../../server/proto.js';
import { waitFor } from './wait.js';

type KnownKeys<T> = keyof { [K in keyof T as string extends K ? never : K]: T[K] };
type RequestOf<M> = M extends MethodDefinition<infer Req, infer _Res, infer _ReqOut, infer _ResOut> ? Req : never;
type ResponseOf<M> = M extends MethodDefinition<infer _Req, infer _Res, infer _ReqOut, infer Res> ? Res : never;

export interface CallOptions {
  /** Milliseconds before the call fails with DEADLINE_EXCEEDED (default 60 s). */
  timeoutMs?: number;
}

/** One CRI service, each method callable by name with its typed request and response. */
export class ServiceClient<D> {
  constructor(private readonly client: grpc.Client, private readonly definition: grpc.ServiceDefinition) {}

  call<K extends KnownKeys<D> & keyof D & string>(name: K, request: RequestOf<D[K]>, options: CallOptions = {}): Promise<ResponseOf<D[K]>> {
    const method = this.definition[name];
    return new Promise((resolve, reject) => {
      this.client.makeUnaryRequest(
        method.path, method.requestSerialize, method.responseDeserialize, request,
        new grpc.Metadata(), { deadline: Date.now() + (options.timeoutMs ?? 60_000) },
        (err, response) => (err ? reject(err) : resolve(response as ResponseOf<D[K]>)),
      );
    });
  }

  /** A unary call's reply as the server encoded it, not decoded. */
  raw<K extends KnownKeys<D> & keyof D & string>(name: K, request: RequestOf<D[K]>): Promise<Buffer> {
    const method = this.definition[name];
    return new Promise((resolve, reject) => {
      this.client.makeUnaryRequest(method.path, method.requestSerialize, (bytes: Buffer) => bytes, request,
        (err, response) => (err ? reject(err) : resolve(response!)));
    });
  }

  /** A server-streaming call's messages, until the stream ends or `until` says stop. */
  stream<K extends KnownKeys<D> & keyof D & string>(name: K, request: RequestOf<D[K]>): AsyncIterable<ResponseOf<D[K]>> & { cancel(): void } {
    const method = this.definition[name];
    const call = this.client.makeServerStreamRequest(method.path, method.requestSerialize, method.responseDeserialize, request);
    // The call is an async iterable and has cancel() of its own.
    return call as unknown as AsyncIterable<ResponseOf<D[K]>> & { cancel(): void };
  }
}

export class CriClient {
  readonly runtime: ServiceClient<RuntimeServiceDefinition>;
  readonly image: ServiceClient<ImageServiceDefinition>;
  private readonly clients: grpc.Client[];

  /**
   * `endpoint` is a socket path or a `unix://` address. `reconnectMs` replaces grpc's reconnect backoff (1 s and
   * growing) by a fixed short one, for a client that waits for a daemon to come up and must see it at once.
   */
  constructor(endpoint: string, opts: { reconnectMs?: number } = {}) {
    const address = endpoint.startsWith('unix:') ? endpoint : `unix://${endpoint}`;
    const cri = loadCri();
    const options = {
      'grpc.max_receive_message_length': 16 * 1024 * 1024, 'grpc.max_send_message_length': 32 * 1024 * 1024,
      ...(opts.reconnectMs && { 'grpc.initial_reconnect_backoff_ms': opts.reconnectMs, 'grpc.max_reconnect_backoff_ms': opts.reconnectMs }),
    };
    const runtime = new cri.RuntimeService(address, grpc.credentials.createInsecure(), options);
    const image = new cri.ImageService(address, grpc.credentials.createInsecure(), options);
    this.clients = [runtime, image];
    this.runtime = new ServiceClient(runtime, cri.RuntimeService.service);
    this.image = new ServiceClient(image, cri.ImageService.service);
  }

  /** Pending removals as Status reports them: a removed container's cleanup runs after RemoveContainer answers. */
  async pendingRemovals(): Promise<{ id: string; attempts: number; lastError: string }[]> {
    return JSON.parse((await this.runtime.call('Status', { verbose: true })).info.pendingRemovals ?? '[]') as { id: string; attempts: number; lastError: string }[];
  }

  /** Waits until the daemon has no removal left to finish. */
  async removalsSettled(ms = 20_000): Promise<void> {
    await waitFor(async () => (await this.pendingRemovals()).length === 0, ms, 'pending removals to finish');
  }

  close(): void {
    for (const client of this.clients) client.close();
  }
}
