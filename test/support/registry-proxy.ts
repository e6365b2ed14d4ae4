// A recording front for a test registry on 127.0.0.1: it notes every request's path and Authorization header,
// and can speak TLS with a given certificate, send blob reads to a second origin by redirect (which records
// too), stall blob bodies after their headers, or throttle them.
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import { request as httpRequest, createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { execa } from 'execa';

export interface RecordedRequest { path: string; authorization?: string }

export interface ProxyOptions {
  /** Serve HTTPS with this certificate (PEM). */
  tls?: { key: string; cert: string };
  /** Answer blob reads with a 307 to a second origin (localhost instead of 127.0.0.1, another port). */
  redirectBlobs?: boolean;
  /** What the redirect target itself authenticates to the registry with (it is the registry's storage). */
  storageAuthorization?: string;
  /** The redirect target answers every read with 401 and a bearer challenge whose realm is itself. */
  storageChallenges?: boolean;
  /** Blob reads get their status and headers, then no byte more. */
  stallBlobs?: boolean;
  /** Blob bodies trickle at about this many bytes a second. */
  throttleBytesPerSecond?: number;
}

export interface RegistryProxy {
  /** "http(s)://127.0.0.1:<port>". */
  url: string;
  host: string;
  requests: RecordedRequest[];
  /** What the redirect target saw. */
  storageRequests: RecordedRequest[];
  stop(): Promise<void>;
}

function record(req: IncomingMessage, into: RecordedRequest[]): void {
  into.push({ path: req.url ?? '', authorization: req.headers.authorization });
}

/** Streams the upstream answer to `res`, throttled when asked, with the given Authorization. */
function forward(upstream: string, req: IncomingMessage, res: ServerResponse, authorization: string | undefined, throttle?: number): void {
  const headers: Record<string, string> = {};
  if (req.headers.accept) headers.accept = req.headers.accept;
  if (authorization) headers.authorization = authorization;
  const up = httpRequest(`${upstream}${req.url}`, { method: req.method, headers }, (r) => {
    res.writeHead(r.statusCode ?? 502, r.headers);
    if (!throttle) {
      r.pipe(res);
      return;
    }
    // A tenth of the rate every 100 ms.
    const slice = Math.max(1, Math.floor(throttle / 10));
    let pending = Buffer.alloc(0);
    let ended = false;
    const timer = setInterval(() => {
      if (pending.length > 0) {
        res.write(pending.subarray(0, slice));
        pending = pending.subarray(slice);
      }
      if (pending.length < slice) r.resume();
      if (ended && pending.length === 0) { clearInterval(timer); res.end(); }
    }, 100);
    res.on('close', () => { clearInterval(timer); r.destroy(); });
    r.on('data', (c: Buffer) => { pending = Buffer.concat([pending, c]); if (pending.length >= slice * 4) r.pause(); });
    r.on('end', () => { ended = true; });
  });
  up.on('error', () => res.destroy());
  up.end();
}

async function listen(server: Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

export async function startRegistryProxy(upstream: string, opts: ProxyOptions = {}): Promise<RegistryProxy> {
  const requests: RecordedRequest[] = [];
  const storageRequests: RecordedRequest[] = [];
  const storage = createServer((req, res) => {
    record(req, storageRequests);
    if (opts.storageChallenges) {
      res.writeHead(401, { 'www-authenticate': `Bearer realm="http://localhost:${storagePort}/token",service="storage"` }).end();
      return;
    }
    forward(upstream, req, res, opts.storageAuthorization, opts.throttleBytesPerSecond);
  });
  const storagePort = await listen(storage);
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    record(req, requests);
    const blob = req.url?.includes('/blobs/') ?? false;
    if (blob && opts.redirectBlobs) {
      res.writeHead(307, { location: `http://localhost:${storagePort}${req.url}` }).end();
      return;
    }
    if (blob && opts.stallBlobs) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': '1048576' });
      res.flushHeaders();
      return;
    }
    forward(upstream, req, res, req.headers.authorization, blob ? opts.throttleBytesPerSecond : undefined);
  };
  const front = opts.tls ? createHttpsServer({ key: opts.tls.key, cert: opts.tls.cert }, handler) : createServer(handler);
  const port = await listen(front);
  return {
    url: `${opts.tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    host: `127.0.0.1:${port}`,
    requests,
    storageRequests,
    async stop() {
      for (const s of [front, storage]) {
        s.closeAllConnections();
        await new Promise((r) => s.close(r));
      }
    },
  };
}

/** A throwaway CA and a server certificate it signs for 127.0.0.1, made with openssl in `dir`. */
export async function makeTestCa(dir: string): Promise<{ caCert: string; key: string; cert: string }> {
  const p = (f: string) => join(dir, f);
  await execa('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', p('ca.key'), '-out', p('ca.crt'), '-days', '1', '-subj', '/CN=minicri-test-ca']);
  await execa('openssl', ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', p('server.key'), '-out', p('server.csr'), '-subj', '/CN=127.0.0.1']);
  await writeFile(p('ext.cnf'), 'subjectAltName=IP:127.0.0.1\n');
  await execa('openssl', ['x509', '-req', '-in', p('server.csr'), '-CA', p('ca.crt'), '-CAkey', p('ca.key'), '-CAcreateserial', '-out', p('server.crt'), '-days', '1', '-extfile', p('ext.cnf')]);
  return { caCert: await readFile(p('ca.crt'), 'utf8'), key: await readFile(p('server.key'), 'utf8'), cert: await readFile(p('server.crt'), 'utf8') };
}
