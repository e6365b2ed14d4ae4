// An HTTP front for a test registry that misbehaves on purpose: it fails requests transiently and sends blob
// reads to a second origin by redirect, recording which Authorization headers reach that second origin.
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FlakyProxy {
  host: string;
  /** Authorization headers seen by the redirect target (must stay empty). */
  leakedAuth: string[];
  /** Requests answered with 503 so far. */
  failures: number;
  stop(): Promise<void>;
}

async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ server: Server; port: number }> {
  const server = createServer(handler);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as AddressInfo).port };
}

async function forward(upstream: string, req: IncomingMessage, res: ServerResponse, headers: Record<string, string>): Promise<void> {
  const r = await fetch(`${upstream}${req.url}`, { method: req.method, headers, redirect: 'manual' });
  const out: Record<string, string> = {};
  r.headers.forEach((v, k) => { if (k !== 'content-encoding' && k !== 'transfer-encoding') out[k] = v; });
  res.writeHead(r.status, out);
  res.end(Buffer.from(await r.arrayBuffer()));
}

/** `failEvery`: every n-th request to the front gets a 503 (with the retry it still succeeds). */
export async function startFlakyProxy(registryUrl: string, failEvery = 2): Promise<FlakyProxy> {
  const state = { leakedAuth: [] as string[], failures: 0 };
  let count = 0;
  const storage = await listen((req, res) => {
    if (req.headers.authorization) state.leakedAuth.push(req.headers.authorization);
    forward(registryUrl, req, res, {}).catch(() => res.destroy());
  });
  const front = await listen((req, res) => {
    if (++count % failEvery === 0) {
      state.failures++;
      res.writeHead(503, { 'content-type': 'application/json' }).end('{"errors":[{"code":"UNAVAILABLE","message":"try again"}]}');
      return;
    }
    if (req.url?.includes('/blobs/')) {
      res.writeHead(307, { location: `http://localhost:${storage.port}${req.url}` }).end();
      return;
    }
    const headers: Record<string, string> = {};
    if (req.headers.accept) headers.accept = req.headers.accept;
    forward(registryUrl, req, res, headers).catch(() => res.destroy());
  });
  return {
    host: `127.0.0.1:${front.port}`,
    get leakedAuth() { return state.leakedAuth; },
    get failures() { return state.failures; },
    async stop() {
      for (const s of [front.server, storage.server]) {
        s.closeAllConnections();
        await new Promise((r) => s.close(r));
      }
    },
  };
}
