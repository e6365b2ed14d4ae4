// Runs Debian's docker-registry on 127.0.0.1 for tests: plain, behind htpasswd basic auth, or behind a bearer
// token server of our own (JWTs signed with a throwaway certificate the registry trusts).
import { createSign, randomBytes, X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import bcrypt from 'bcryptjs';
import { execa, type ResultPromise } from 'execa';

export interface TestRegistry {
  /** "127.0.0.1:<port>". */
  host: string;
  url: string;
  /** The registry's filesystem storage root (to corrupt blobs on purpose). */
  storage: string;
  /** Token server, when started with auth: 'token'. */
  tokenUrl?: string;
  /** Authorization header for pushing (and pulling) with full rights, or undefined when open. */
  pushAuthorization(repository: string): Promise<string | undefined>;
  stop(): Promise<void>;
}

export interface RegistryOptions {
  /** identityToken: a refresh token the token server also accepts (OAuth2 POST), for kind 'token'. */
  auth?: { kind: 'htpasswd' | 'token'; username: string; password: string; identityToken?: string };
}

export async function freePort(): Promise<number> {
  const srv = createNetServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const { port } = srv.address() as AddressInfo;
  srv.close();
  await once(srv, 'close');
  return port;
}

const SERVICE = 'minicri-test-registry';
const ISSUER = 'minicri-test-issuer';

export async function startRegistry(opts: RegistryOptions = {}): Promise<TestRegistry> {
  const dir = await mkdtemp(join(tmpdir(), 'minicri-image-reg-'));
  const storage = join(dir, 'storage');
  let proc: ResultPromise | undefined;
  let tokenServer: Server | undefined;
  const stop = async () => {
    if (proc && proc.nodeChildProcess.exitCode === null) {
      proc.kill('SIGTERM');
      await proc.catch(() => undefined);
    }
    if (tokenServer) {
      tokenServer.closeAllConnections();
      await new Promise((r) => tokenServer!.close(r));
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const port = await freePort();
    let authYaml = '';
    let tokenUrl: string | undefined;
    let sign: ((scope: string) => string) | undefined;
    if (opts.auth?.kind === 'htpasswd') {
      const hash = bcrypt.hashSync(opts.auth.password, 6);
      await writeFile(join(dir, 'htpasswd'), `${opts.auth.username}:${hash}\n`);
      authYaml = `auth:\n  htpasswd:\n    realm: minicri-test\n    path: ${join(dir, 'htpasswd')}\n`;
    } else if (opts.auth?.kind === 'token') {
      await execa('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
        '-days', '1', '-subj', '/CN=minicri-test-token']);
      const key = await readFile(join(dir, 'key.pem'), 'utf8');
      const cert = new X509Certificate(await readFile(join(dir, 'cert.pem')));
      sign = (scope) => signToken(key, cert, scope);
      const { server, url } = await startTokenServer(opts.auth, sign);
      tokenServer = server;
      tokenUrl = url;
      authYaml = `auth:\n  token:\n    realm: ${url}\n    service: ${SERVICE}\n    issuer: ${ISSUER}\n    rootcertbundle: ${join(dir, 'cert.pem')}\n`;
    }
    const config = `version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: ${storage}
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: 127.0.0.1:${port}
  secret: ${randomBytes(16).toString('hex')}
${authYaml}`;
    await writeFile(join(dir, 'config.yml'), config);
    proc = execa('docker-registry', ['serve', join(dir, 'config.yml')], { stdin: 'ignore', stdout: 'ignore', stderr: 'pipe', buffer: { stderr: true } });
    proc.catch(() => undefined);
    const url = `http://127.0.0.1:${port}`;
    await waitReady(url, proc);
    const auth = opts.auth;
    return {
      host: `127.0.0.1:${port}`,
      url,
      storage,
      tokenUrl,
      async pushAuthorization(repository) {
        if (!auth) return undefined;
        if (auth.kind === 'htpasswd') return `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}`;
        return `Bearer ${sign!(`repository:${repository}:pull,push`)}`;
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

async function waitReady(url: string, proc: ResultPromise): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (proc.nodeChildProcess.exitCode !== null) throw new Error(`docker-registry exited: ${String((await proc.catch((e) => e)).stderr ?? '')}`);
    try {
      await fetch(`${url}/v2/`);
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error(`docker-registry at ${url} did not come up`);
}

function b64url(data: Buffer | string): string {
  return Buffer.from(data).toString('base64url');
}

/** A registry bearer token (JWT, RS256) granting what `scope` asks ("repository:name:pull,push"). */
function signToken(key: string, cert: X509Certificate, scope: string): string {
  const header = { typ: 'JWT', alg: 'RS256', x5c: [cert.raw.toString('base64')] };
  const now = Math.floor(Date.now() / 1000);
  const access = scope
    .split(' ')
    .filter(Boolean)
    .map((s) => {
      const [type, ...rest] = s.split(':');
      const actions = rest.pop()!.split(',');
      return { type, name: rest.join(':'), actions };
    });
  const claims = { iss: ISSUER, sub: 'tester', aud: SERVICE, exp: now + 300, nbf: now - 10, iat: now, jti: randomBytes(8).toString('hex'), access };
  const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
  const signature = createSign('RSA-SHA256').update(input).sign(key);
  return `${input}.${b64url(signature)}`;
}

async function startTokenServer(auth: { username: string; password: string; identityToken?: string }, sign: (scope: string) => string): Promise<{ server: Server; url: string }> {
  const expected = `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}`;
  const deny = (res: import('node:http').ServerResponse) =>
    res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ details: 'invalid username or password' }));
  const server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    if (u.pathname !== '/token') { res.writeHead(404).end(); return; }
    if (req.method === 'POST') {
      // OAuth2 refresh-token grant, as clients holding an identity token use it.
      let body = '';
      req.on('data', (c: Buffer) => { body += c.toString(); });
      req.on('end', () => {
        const form = new URLSearchParams(body);
        if (form.get('grant_type') !== 'refresh_token' || !auth.identityToken || form.get('refresh_token') !== auth.identityToken) { deny(res); return; }
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ access_token: sign(form.get('scope') ?? ''), expires_in: 300 }));
      });
      return;
    }
    if (req.headers.authorization !== expected) { deny(res); return; }
    const scope = u.searchParams.get('scope') ?? '';
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token: sign(scope), expires_in: 300 }));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return { server, url: `http://127.0.0.1:${port}/token` };
}
