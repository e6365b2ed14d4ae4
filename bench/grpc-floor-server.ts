// The floor of a small CRI call in Node: a bare grpc-js server on a unix socket, with the daemon's proto and
// no work in its handler (Version answers a constant). The rpc bench times it with the same client as the
// runtimes: what a runtime's small RPC costs above this is the runtime's own; what this costs above
// containerd's figure is Node's HTTP/2 and grpc-js. Run by bench/rpc.ts as a child, with the daemon's node flags.
// Usage: node dist/bench/grpc-floor-server.js <socket>
import * as grpc from '@grpc/grpc-js';
import { loadCri } from '../server/proto.js';

const socket = process.argv[2];
if (!socket) throw new Error('usage: grpc-floor-server.js <socket>');
const cri = loadCri();
const server = new grpc.Server();
server.addService(cri.RuntimeService.service, {
  Version: (_call: unknown, done: grpc.sendUnaryData<object>) => done(null, { version: '0.1.0', runtime_name: 'floor', runtime_version: '0', runtime_api_version: 'v1' }),
});
server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (err) => {
  if (err) throw err;
  process.stdout.write('serving\n');
});
process.on('SIGTERM', () => server.tryShutdown(() => process.exit(0)));
