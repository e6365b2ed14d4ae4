// Starts bench/grpc-floor-server.ts as a child with the daemon's node flags, and a client of it.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CriClient } from '../../test/support/cri-client.js';
import { MAIN } from '../../test/support/daemon.js';
import { shebangNodeCommand } from './targets.js';

export type FloorKind = 'grpc' | 'http2' | { replay: Record<string, Buffer> };

/** Runs `use` with a client of a floor server of that kind; the server and its files are gone after. */
export async function withFloorServer<T>(kind: FloorKind, use: (client: CriClient) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'minicri-grpc-floor-'));
  try {
    const socket = join(dir, 'floor.sock');
    let args = [socket, typeof kind === 'string' ? kind : 'replay'];
    if (typeof kind !== 'string') {
      const file = join(dir, 'replies.json');
      await writeFile(file, JSON.stringify(Object.fromEntries(Object.entries(kind.replay).map(([k, b]) => [k, b.toString('base64')]))));
      args = [...args, file];
    }
    const { env, nodeFlags } = shebangNodeCommand(readFileSync(MAIN, 'utf8'));
    const server = spawn(process.execPath, [...nodeFlags, fileURLToPath(new URL('../grpc-floor-server.js', import.meta.url)), ...args],
      { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
    const exited = once(server, 'exit');
    const client = new CriClient(socket);
    try {
      // `once` rejects on the child's 'error' (it could not be started); one that ends before serving failed.
      await Promise.race([once(server.stdout!, 'data'), exited.then(([code, signal]) => {
        throw new Error(`the floor server ended before serving (${String(code ?? signal)})`);
      })]);
      return await use(client);
    } finally {
      client.close();
      if (server.exitCode === null && server.signalCode === null) {
        server.kill('SIGTERM');
        await exited.catch(() => undefined);
      }
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
