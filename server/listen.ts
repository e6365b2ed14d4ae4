// Serves gRPC on a unix socket through our own net.Server, so every connection passes through code
// of ours before grpc-js sees it (see authority handling), and so the socket file is ours to guard.
import { chmod, lstat, mkdir, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { filterAuthority } from '../http2/authority-filter.js';

/** True when something accepts connections on the socket path. */
export function socketAnswers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.connect(path);
    probe.once('connect', () => { probe.destroy(); resolve(true); });
    probe.once('error', () => resolve(false));
  });
}

/** Removes a socket file left by a daemon that died; refuses when a live server holds it or it is no socket. */
export async function claimSocketPath(path: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o755 });
  const existing = await lstat(path).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
  if (!existing) return;
  if (!existing.isSocket()) throw new Error(`${path} exists and is not a socket: move it away or choose another socket path`);
  if (await socketAnswers(path)) throw new Error(`another server is already listening on ${path}: stop it first or choose another socket path`);
  await unlink(path);
}

export interface UnixListener {
  close(): Promise<void>;
}

/**
 * Listens on `path` (mode 0660, claimed first with claimSocketPath) and hands each connection to the gRPC server.
 * `wrap` interposes on a connection's byte stream before grpc-js reads it: by default the authority filter,
 * so clients sending the socket path as :authority (older grpc-go) are answered.
 */
export async function listenUnix(
  server: grpc.Server,
  path: string,
  wrap: (socket: net.Socket) => import('node:stream').Duplex = (s) => filterAuthority(s),
): Promise<UnixListener> {
  const injector = server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  const listener = net.createServer((socket) => injector.injectConnection(wrap(socket)));
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(path, () => { listener.off('error', reject); resolve(); });
  });
  await chmod(path, 0o660);
  return {
    // Stops accepting; connections already handed to grpc-js end with the server's own shutdown.
    close: () => new Promise<void>((resolve) => listener.close(() => resolve())),
  };
}
