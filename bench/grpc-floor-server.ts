// The floor of a small CRI call in Node, in two kinds: `grpc` is a bare grpc-js server with the daemon's proto
// and no work in its handler (Version answers a constant); `http2` is node:http2 alone answering every stream
// with the same Version reply, already encoded, and no gRPC library at all. The rpc bench times both with the
// same client as the runtimes: what a runtime's small RPC costs above the first is the runtime's own; what the
// first costs above the second is grpc-js; what the second costs above containerd's figure is Node's HTTP/2.
// `replay` is the floor of kubelet's relist: a bare grpc-js server answering the relist's four RPCs with replies
// a daemon gave (already encoded, as minicri sends its lists), and Version for whatever else the bench calls.
// Run by bench/rpc.ts and bench/density.ts as a child, with the daemon's node flags.
// Usage: node dist/bench/grpc-floor-server.js <socket> [grpc|http2|replay <replies.json>]
import * as grpc from '@grpc/grpc-js';
import { readFileSync } from 'node:fs';
import http2 from 'node:http2';
import { loadCri } from '../server/proto.js';

const [socket, kind = 'grpc', repliesFile] = process.argv.slice(2);
if (!socket || !['grpc', 'http2', 'replay'].includes(kind) || (kind === 'replay') !== Boolean(repliesFile)) {
  throw new Error('usage: grpc-floor-server.js <socket> [grpc|http2|replay <replies.json>]');
}
const cri = loadCri();
const version = { version: '0.1.0', runtime_name: 'floor', runtime_version: '0', runtime_api_version: 'v1' };
const serving = () => process.stdout.write('serving\n');

if (kind !== 'http2') {
  const server = new grpc.Server();
  const handlers: grpc.UntypedServiceImplementation = {
    Version: (_call: unknown, done: grpc.sendUnaryData<object>) => done(null, version),
  };
  let definition: grpc.ServiceDefinition = cri.RuntimeService.service;
  if (repliesFile) {
    // Each replayed method sends its bytes as they are: no encoding on the floor's time.
    const replies = JSON.parse(readFileSync(repliesFile, 'utf8')) as Record<string, string>;
    const raw = Object.fromEntries(Object.entries(replies).map(([name, b64]) => [name, Buffer.from(b64, 'base64')]));
    definition = Object.fromEntries(Object.entries(definition).map(([name, method]) =>
      [name, raw[name] ? { ...method, responseSerialize: (b: Buffer) => b } : method]));
    for (const [name, bytes] of Object.entries(raw)) handlers[name] = (_call: unknown, done: grpc.sendUnaryData<Buffer>) => done(null, bytes);
  }
  server.addService(definition, handlers);
  server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (err) => {
    if (err) throw err;
    serving();
  });
  process.on('SIGTERM', () => server.tryShutdown(() => process.exit(0)));
} else {
  // A gRPC message: a zero compression flag, its length as 4 bytes big-endian, then the protobuf bytes.
  const body = cri.RuntimeService.service.Version!.responseSerialize(version);
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(body.length, 1);
  const message = Buffer.concat([prefix, body]);
  const server = http2.createServer();
  server.on('stream', (stream: http2.ServerHttp2Stream) => {
    stream.resume();
    stream.once('end', () => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(message);
    });
  });
  server.listen(socket, serving);
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}
