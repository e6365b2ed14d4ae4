// Latency a unary call pays for the authority filter. Prints JSON:
//   median per-call latency (ms) with a refused authority (rewrite path), with an accepted one (pass
//   path), straight into the injector without the filter, and on grpc-js's own unix listener; plus the
//   filter core's cost per rewritten request, measured without sockets.
// The rewrite path is measured twice: first in a fresh process ("rewriteColdProcess"), then again.
// hpack.js's buffer helpers (wbuf, obuf) allocate with the deprecated `new Buffer()`, and Node checks the
// caller's stack on each such call until it has done so 10000 times; that costs the first few
// thousand rewritten calls of a daemon ~0.1 ms each, and nothing afterwards.
// Run: npx tsc -p . && node dist/bench/authority-filter.js [calls]
import { performance } from 'node:perf_hooks';
import { ClientFrameFilter } from '../http2/authority-filter.js';
import { connectRaw, rawUnary, startEchoServer, type Wiring } from '../test/support/echo-server.js';
import {
  DATA, END_HEADERS, END_STREAM, HEADERS, clientEncoder, connectionStart, encodeFields, frame, grpcMessage, requestFields,
} from '../test/support/h2-frames.js';

const SOCKET_AUTHORITY = '/run/minicri/minicri.sock';
const TARGET_ADDED_MS = 0.2;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

async function medianCallMs(wiring: Wiring, authority: string, calls: number): Promise<number> {
  const server = await startEchoServer(wiring);
  const session = connectRaw(server.socketPath);
  session.on('error', () => {});
  try {
    const request = Buffer.from('\x0a\x02v1', 'latin1');
    for (let i = 0; i < Math.min(200, calls); i++) await rawUnary(session, { authority, request });
    const times: number[] = [];
    for (let i = 0; i < calls; i++) {
      const start = performance.now();
      const answer = await rawUnary(session, { authority, request });
      times.push(performance.now() - start);
      if (answer.grpcStatus !== '0') throw new Error(`call failed: ${answer.grpcStatus} ${answer.grpcMessage}`);
    }
    return median(times);
  } finally {
    session.destroy();
    await server.close();
  }
}

/** Microseconds the filter core spends per rewritten request (one header block plus one DATA frame). */
function coreRewriteUs(requests: number): number {
  const encoder = clientEncoder();
  const filter = new ClientFrameFilter();
  filter.push(connectionStart());
  const body = frame(DATA, END_STREAM, 1, grpcMessage(Buffer.from('\x0a\x02v1', 'latin1')));
  const inputs = Array.from({ length: requests }, (_, i) => {
    const streamId = 2 * i + 1;
    body.writeUInt32BE(streamId, 5);
    return Buffer.concat([frame(HEADERS, END_HEADERS, streamId, encodeFields(encoder, requestFields(SOCKET_AUTHORITY))), body]);
  });
  const start = performance.now();
  for (const input of inputs) filter.push(input);
  return ((performance.now() - start) * 1000) / requests;
}

const calls = Number(process.argv[2] ?? 3000);
const rewriteCold = await medianCallMs('filter', SOCKET_AUTHORITY, calls);
const passThrough = await medianCallMs('filter', 'localhost', calls);
const injectNoFilter = await medianCallMs('inject', 'localhost', calls);
const native = await medianCallMs('bind', 'localhost', calls);
const rewrite = await medianCallMs('filter', SOCKET_AUTHORITY, calls);
const round = (ms: number): number => Math.round(ms * 10_000) / 10_000;
console.log(JSON.stringify({
  bench: 'authority-filter',
  calls,
  medianCallMs: { rewriteColdProcess: round(rewriteCold), rewrite: round(rewrite), passThrough: round(passThrough), injectNoFilter: round(injectNoFilter), nativeBind: round(native) },
  addedByRewriteMs: round(rewrite - passThrough),
  addedByRewriteColdProcessMs: round(rewriteCold - passThrough),
  addedByPassThroughMs: round(passThrough - injectNoFilter),
  coreRewriteUsPerRequest: Math.round(coreRewriteUs(20_000) * 100) / 100,
  targetAddedMs: TARGET_ADDED_MS,
  withinTarget: rewrite - passThrough < TARGET_ADDED_MS,
}, null, 2));
