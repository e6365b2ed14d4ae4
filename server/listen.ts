// Serves gRPC on a unix socket through our own net.Server, so every connection passes through code
// of ours before grpc-js sees it (see authority handling), and so the socket file is ours to guard.
import { chmod, lstat, mkdir, mkdtemp, rename, rm, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
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
  if (await socketAnswers(path)) {
    throw new Error(`another server is already listening on ${path}: stop it first or choose another socket path`);
  }
  await unlink(path);
}

export interface UnixListener {
  close(): Promise<void>;
}

/**
 * Binds `server` to the unix socket `path` with mode 0660 and never any looser, not even between the bind
 * and a chmod: the socket is bound in a fresh directory only root can enter (mkdtemp makes it 0700, beside
 * `path` so the rename stays on one filesystem), made 0660 there, then renamed into place. Setting the umask
 * around the bind instead would change it for the whole process, so for every file the thread pool creates
 * meanwhile. Node removes the name a socket was bound to when it closes, which after the rename is the
 * staging one: `close` removes `path` itself (first, so it never removes another server's newer socket).
 */
export async function listenUnixSocket(server: net.Server, path: string): Promise<UnixListener> {
  const staging = await mkdtemp(join(dirname(path), '.sock-'));
  try {
    const staged = join(staging, 's');
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(staged, () => { server.off('error', reject); resolve(); });
    });
    try {
      await chmod(staged, 0o660);
      await rename(staged, path);
    } catch (err) {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      throw err;
    }
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
  return {
    close: async () => {
      await unlink(path).catch(() => undefined);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Listens on `path` (claimed first with claimSocketPath; see listenUnixSocket for its mode) and hands each
 * connection to the gRPC server. `wrap` interposes on a connection's byte stream before grpc-js reads it: by
 * default the authority filter, so clients sending the socket path as :authority (older grpc-go) are answered.
 * `close` stops accepting; connections already handed to grpc-js end with the server's own shutdown.
 */
export async function listenUnix(
  server: grpc.Server,
  path: string,
  wrap: (socket: net.Socket) => import('node:stream').Duplex = (s) => filterAuthority(s),
): Promise<UnixListener> {
  const injector = server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  return listenUnixSocket(net.createServer((socket) => injector.injectConnection(wrap(socket))), path);
}
