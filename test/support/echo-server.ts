// A real grpc-js server behind net.Server + connection injector (+ the authority filter) on a temp
// unix socket, and a raw HTTP/2 gRPC client for it. Shared by the integration test and the bench.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { filterAuthority } from '../../http2/authority-filter.js';

export const ECHO_PATH = '/minicri.authoritytest.Echo/Echo';

export interface EchoServer {
  socketPath: string;
  close(): Promise<void>;
}

/** How the socket hands connections to grpc-js: through the filter, straight to the injector, or
 *  grpc-js's own bindAsync listener (the native baseline). */
export type Wiring = 'filter' | 'inject' | 'bind';

/** Serves one unary method that answers "echo:" + the request bytes (no protobuf needed). */
export async function startEchoServer(wiring: Wiring = 'filter'): Promise<EchoServer> {
  const dir = await mkdtemp(join(tmpdir(), 'minicri-authority-'));
  const socketPath = join(dir, 'minicri.sock');
  const server = new grpc.Server();
  const identity = (b: Buffer): Buffer => b;
  server.addService(
    {
      Echo: {
        path: ECHO_PATH, requestStream: false, responseStream: false,
        requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity,
      },
    },
    {
      Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
        callback(null, Buffer.concat([Buffer.from('echo:'), call.request]));
      },
    },
  );
  try {
    if (wiring === 'bind') {
      await new Promise<void>((resolve, reject) => server.bindAsync(`unix://${socketPath}`, grpc.ServerCredentials.createInsecure(),
        (err) => (err ? reject(err) : resolve())));
      return {
        socketPath,
        close: async () => {
          server.forceShutdown();
          await rm(dir, { recursive: true, force: true });
        },
      };
    }
    const injector = server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
    const listener = net.createServer((socket) => injector.injectConnection(wiring === 'filter' ? filterAuthority(socket) : socket));
    await new Promise<void>((resolve, reject) => listener.once('error', reject).listen(socketPath, resolve));
    return {
      socketPath,
      close: async () => {
        const closed = new Promise((resolve) => listener.close(resolve));
        injector.destroy();
        server.forceShutdown();
        await closed;
        await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    server.forceShutdown();
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}

export function connectRaw(socketPath: string): http2.ClientHttp2Session {
  return http2.connect('http://localhost', { createConnection: () => net.connect(socketPath) });
}

export interface UnaryAnswer {
  grpcStatus: string | undefined;
  grpcMessage: string | undefined;
  message: Buffer;
}

export interface RawCall {
  /** null sends no :authority (Node then sends `host` instead). */
  authority: string | null;
  request: Buffer;
  path?: string;
  /** Sends the body in this many pieces, a tick apart, so that concurrent calls' DATA frames interleave. */
  bodyChunks?: number;
}

/** One gRPC unary call framed by hand (5-byte prefix + message bytes) on a raw HTTP/2 session. */
export function rawUnary(session: http2.ClientHttp2Session, { authority, request, path = ECHO_PATH, bodyChunks = 1 }: RawCall): Promise<UnaryAnswer> {
  return new Promise((resolve, reject) => {
    const headers: http2.OutgoingHttpHeaders = {
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/grpc',
      te: 'trailers',
      'user-agent': 'grpc-go/1.26.0',
    };
    if (authority === null) headers.host = 'localhost';
    else headers[':authority'] = authority;
    const stream = session.request(headers);
    const parts: Buffer[] = [];
    let status: string | undefined;
    let message: string | undefined;
    stream.on('response', (h) => { status = h['grpc-status'] as string | undefined; message = h['grpc-message'] as string | undefined; });
    stream.on('trailers', (h) => { status = h['grpc-status'] as string | undefined; message = h['grpc-message'] as string | undefined; });
    stream.on('data', (b: Buffer) => parts.push(b));
    stream.on('error', reject);
    stream.on('close', () => {
      if (stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR) {
        reject(new Error(`stream reset with code ${stream.rstCode}`));
        return;
      }
      const body = Buffer.concat(parts);
      resolve({ grpcStatus: status, grpcMessage: message, message: body.length >= 5 ? body.subarray(5, 5 + body.readUInt32BE(1)) : body });
    });
    const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), request]);
    frame.writeUInt32BE(request.length, 1);
    const step = Math.ceil(frame.length / bodyChunks);
    const sendFrom = (offset: number): void => {
      if (offset + step >= frame.length) {
        stream.end(frame.subarray(offset));
        return;
      }
      stream.write(frame.subarray(offset, offset + step));
      setImmediate(() => sendFrom(offset + step));
    };
    sendFrom(0);
  });
}
