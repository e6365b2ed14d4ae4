// A server-streaming gRPC call made over a bare HTTP/2 stream that reads nothing until told to: a client that
// truly stops reading, so the server's flow-control window fills. (grpc-js's own client, paused, still
// takes every message off the connection into its memory, so the server would never see it lag.)
import http2 from 'node:http2';
import { connect } from 'node:net';

export interface IdleStream {
  /** Starts reading: every message's bytes, then the status from the trailers. */
  resume(): Promise<{ code: number; details: string; messages: Buffer[] }>;
  close(): void;
}

/**
 * Calls `path` (/package.Service/Method) with an empty request at `address` (a unix socket path or host:port),
 * with `extraHeaders` added (a `grpc-timeout` the server alone enforces: this client never cancels by itself).
 */
export function idleServerStream(address: string, path: string, extraHeaders: http2.OutgoingHttpHeaders = {}): IdleStream {
  const session = address.startsWith('/')
    ? http2.connect('http://localhost', { createConnection: () => connect(address) })
    : http2.connect(`http://${address}`);
  session.on('error', () => undefined); // the stream's own end reports it
  const stream = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...extraHeaders });
  // An empty request message: not compressed, length 0.
  stream.end(Buffer.alloc(5));
  stream.pause();
  let trailers: http2.IncomingHttpHeaders | undefined;
  stream.on('trailers', (t) => { trailers = t; });
  let headers: http2.IncomingHttpHeaders | undefined;
  stream.on('response', (h) => { headers = h; });
  return {
    resume: () => new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('error', reject);
      stream.on('end', () => {
        const body = Buffer.concat(chunks);
        const messages: Buffer[] = [];
        for (let at = 0; at + 5 <= body.length; at += 5 + body.readUInt32BE(at + 1)) messages.push(body.subarray(at + 5, at + 5 + body.readUInt32BE(at + 1)));
        // A trailers-only answer carries the status in its headers.
        const status = trailers ?? headers ?? {};
        resolve({ code: Number(status['grpc-status']), details: decodeURIComponent(String(status['grpc-message'] ?? '')), messages });
      });
      stream.resume();
    }),
    close: () => { stream.close(); session.close(); },
  };
}
