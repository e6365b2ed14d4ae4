// A client for the OCI distribution v2 API: manifests and blobs from a registry or its mirrors, with
// bearer-token and basic authentication, redirects, retries of transient failures and actionable errors.
import { createHash } from 'node:crypto';
import { Transform, type Readable } from 'node:stream';
import {
  DeadlineExceeded, Internal, InvalidArgument, MinicriError, NotFound, PermissionDenied, ResourceExhausted, Unavailable,
} from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { retry } from '../../core/retry.js';
import { basicCredentials, basicHeader, parseWwwAuthenticate, pullScope } from './auth.js';
import { CredentialFile, requestAuthApplies } from './credentials.js';
import { readCapped, undiciTransport, type HttpAnswer, type HttpInit, type Transport } from './http.js';
import { DEFAULT_REGISTRY_LIMITS, overLimitMessage, type RegistryLimits } from './limits.js';
import { digestOf } from './content.js';
import { MANIFEST_ACCEPT } from './manifest.js';
import { DEFAULT_REGISTRY, formatReference, type ImageRef } from './reference.js';
import { TlsDispatchers } from './tls.js';
import { TokenCache } from './token-cache.js';
import type { AuthConfig, RegistryHostsConfig } from './types.js';

export interface Endpoint {
  /** "https://registry-1.docker.io", "http://127.0.0.1:5000". */
  url: string;
  mirror: boolean;
}

/** Certificate verification failures: retrying will not help, a CA in certs.d will. */
const TLS_TRUST_ERROR = new RegExp('^(?:UNABLE_TO_GET_ISSUER_CERT(?:_LOCALLY)?|UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN'
  + '|DEPTH_ZERO_SELF_SIGNED_CERT|CERT_UNTRUSTED|ERR_TLS_CERT_ALTNAME_INVALID|CERT_HAS_EXPIRED)$');
const MAX_REDIRECTS = 5;
/** Default for manifestTimeoutMs: a manifest is small, an endpoint that cannot serve one in this time is unreachable. */
const MANIFEST_TIMEOUT_MS = 30_000;

function isLoopbackHost(hostPort: string): boolean {
  const host = hostPort.replace(/:\d+$/, '').replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** Hosts listed as insecure: plain HTTP unless an endpoint says https://, and then an unverified certificate. */
function listedInsecure(hostPort: string, insecure: string[]): boolean {
  return insecure.includes(hostPort) || insecure.includes(hostPort.replace(/:\d+$/, ''));
}

/** Spoken to over plain HTTP when an endpoint names no scheme: listed hosts, and loopback always. */
function isInsecure(hostPort: string, insecure: string[]): boolean {
  return isLoopbackHost(hostPort) || listedInsecure(hostPort, insecure);
}

function endpointUrl(spec: string, insecure: string[]): string {
  const s = spec.replace(/\/+$/, '');
  if (/^https?:\/\//.test(s)) return s;
  return `${isInsecure(s, insecure) ? 'http' : 'https'}://${s}`;
}

/** Where to look for a registry's content, in order: its mirrors, then itself unless mirrors-only. */
export function endpointsFor(registry: string, hosts: RegistryHostsConfig): Endpoint[] {
  const m = hosts.mirrors[registry];
  const out: Endpoint[] = (m?.endpoints ?? []).map((e) => ({ url: endpointUrl(e, hosts.insecure), mirror: true }));
  if (!m?.mirrorsOnly) {
    out.push({ url: endpointUrl(registry === DEFAULT_REGISTRY ? 'registry-1.docker.io' : registry, hosts.insecure), mirror: false });
  }
  return out;
}

export interface RegistryClientOptions {
  hosts: RegistryHostsConfig;
  log: Logger;
  /** Attempts for transient failures (network resets, 5xx, 429). */
  attempts?: number;
  /** Time for one manifest request before the endpoint counts as unreachable. */
  manifestTimeoutMs?: number;
  /** Injected for tests that record what is sent where; defaults to undici's request. */
  transport?: Transport;
  /** What is read of a registry's answers at most; defaults to DEFAULT_REGISTRY_LIMITS. */
  limits?: Partial<RegistryLimits>;
}

/** An answer worth asking again for (HTTP 5xx, 429), carried through the retries; the last one is returned. */
class BusyAnswer extends Error {
  constructor(readonly res: HttpAnswer) {
    super(`HTTP ${res.status}`);
  }
}

/** Failure of one endpoint, kept to explain the whole attempt. */
class EndpointError extends Error {
  constructor(
    readonly kind: 'notfound' | 'denied' | 'unreachable' | 'timeout' | 'limit' | 'bad', message: string, readonly status?: number,
  ) {
    super(message);
  }
}

export interface ManifestFetch {
  endpoint: Endpoint;
  digest: string;
  contentType: string | undefined;
  bytes: Buffer;
}

export class RegistryClient {
  private readonly attempts: number;
  private readonly transport: Transport;
  readonly limits: RegistryLimits;
  /** Authorization headers by endpoint+scope+credential, so a pull's requests after the first skip the 401 round trip. */
  private readonly authCache: TokenCache;

  private readonly nodeCredentials: CredentialFile;
  private readonly tls: TlsDispatchers;

  constructor(private readonly opts: RegistryClientOptions) {
    this.attempts = opts.attempts ?? 3;
    this.transport = opts.transport ?? undiciTransport;
    this.limits = { ...DEFAULT_REGISTRY_LIMITS, ...opts.limits };
    this.authCache = new TokenCache(this.limits.tokenCacheEntries, this.limits.tokenLifetimeSeconds);
    this.nodeCredentials = new CredentialFile(opts.hosts.authFile);
    this.tls = new TlsDispatchers(opts.hosts.certsDir);
  }


  /**
   * What a request to `endpoint` for an image of `registry` authenticates with: the pull's own credentials
   * only at the registry they were given for, a mirror only what the node's credentials file has for it.
   */
  private credentials(endpoint: Endpoint, registry: string, auth: AuthConfig | undefined): AuthConfig | undefined {
    if (!endpoint.mirror && auth && requestAuthApplies(auth, registry)) return auth;
    return this.nodeCredentials.forHost(endpoint.mirror ? endpoint.url : registry);
  }

  endpoints(registry: string): Endpoint[] {
    return endpointsFor(registry, this.opts.hosts);
  }

  /**
   * Fetches the manifest (or index) `reference` (tag or digest) of ref's repository from the first endpoint that
   * has it. The digest is computed from the bytes and, when asked by digest, must match.
   */
  getManifest(ref: ImageRef, reference: string, auth?: AuthConfig, only?: Endpoint, signal?: AbortSignal): Promise<ManifestFetch> {
    return this.fromFirstEndpoint(ref, reference, auth, only, signal,
      (endpoint, creds, asking) => this.fetchManifest(endpoint, ref, reference, creds, asking));
  }

  /**
   * The first endpoint that serves manifest `digest` to these credentials, asked with HEAD (GET where HEAD is
   * not allowed): local content of that digest is used for this pull only once the registry confirmed it, so a
   * pull without the credentials of a private image never gets it from another pull's content.
   */
  confirmManifest(ref: ImageRef, digest: string, auth?: AuthConfig, signal?: AbortSignal): Promise<Endpoint> {
    return this.fromFirstEndpoint(ref, digest, auth, undefined, signal, async (endpoint, creds, asking) => {
      let res: HttpAnswer;
      try {
        res = await this.request(endpoint, ref.repository, `manifests/${digest}`, MANIFEST_ACCEPT, creds, asking, 'HEAD');
      } catch (err) {
        if (!(err instanceof EndpointError && err.status === 405)) throw err;
        return (await this.fetchManifest(endpoint, ref, digest, creds, asking)).endpoint;
      }
      await res.discard().catch(() => undefined);
      const served = res.headers.get('docker-content-digest');
      if (served && served !== digest) throw new EndpointError('bad', `answers manifest ${digest} with digest ${served}`);
      return endpoint;
    });
  }

  private async fetchManifest(
    endpoint: Endpoint, ref: ImageRef, reference: string, creds: AuthConfig | undefined, signal: AbortSignal,
  ): Promise<ManifestFetch> {
    const res = await this.request(endpoint, ref.repository, `manifests/${reference}`, MANIFEST_ACCEPT, creds, signal);
    const bytes = await readLimited(res, this.limits.manifestBytes, `manifest ${reference} from ${endpoint.url}`);
    const digest = digestOf(bytes);
    if (reference.startsWith('sha256:') && digest !== reference) {
      throw new EndpointError('bad', `served a manifest whose digest is ${digest}, not the requested ${reference}`);
    }
    return { endpoint, digest, contentType: res.headers.get('content-type') ?? undefined, bytes };
  }

  /** `attempt` at each endpoint for the image (or `only`), each in its own time, until one succeeds. */
  private async fromFirstEndpoint<T>(
    ref: ImageRef, reference: string, auth: AuthConfig | undefined, only: Endpoint | undefined, signal: AbortSignal | undefined,
    attempt: (endpoint: Endpoint, creds: AuthConfig | undefined, signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    const endpoints = only ? [only] : this.endpoints(ref.registry);
    // Resolving the image's own reference is where a pull starts talking to registries (containerd reads its
    // hosts directory there too): certs.d is read afresh from here, once per host, not on every request.
    if (!only && reference === (ref.digest ?? ref.tag)) this.tls.refresh();
    const failures: Array<{ endpoint: Endpoint; err: EndpointError }> = [];
    const timeoutMs = this.opts.manifestTimeoutMs ?? MANIFEST_TIMEOUT_MS;
    for (const endpoint of endpoints) {
      // Each endpoint has its own time: one that cannot answer in it is passed over, like a stalled blob download.
      const late = `no answer within ${timeoutMs / 1000} s for manifest ${reference}`;
      const deadline = new AbortController();
      const timer = setTimeout(() => deadline.abort(new DeadlineExceeded(`${endpoint.url}: ${late}`)), timeoutMs);
      try {
        const asking = signal ? AbortSignal.any([signal, deadline.signal]) : deadline.signal;
        return await attempt(endpoint, this.credentials(endpoint, ref.registry, auth), asking);
      } catch (err) {
        // The caller's deadline or cancel ends the pull; the endpoint's own time only this endpoint's try.
        if (signal?.aborted) throw signal.reason;
        const failure = deadline.signal.aborted ? new EndpointError('timeout', late) : err;
        if (!(failure instanceof EndpointError)) throw err;
        this.opts.log.debug({ endpoint: endpoint.url, ref: formatReference(ref), err: failure.message }, 'manifest fetch failed');
        failures.push({ endpoint, err: failure });
      } finally {
        clearTimeout(timer);
      }
    }
    throw explain(ref, reference, failures, !only && this.opts.hosts.mirrors[ref.registry]?.mirrorsOnly === true);
  }

  /**
   * Opens a blob for reading. Errors are typed; the caller verifies the digest while streaming. The stream
   * fails with DeadlineExceeded, naming blob and endpoint, when no byte (nor the answer's headers) comes for
   * `stallMs`; it stops when `signal` aborts, failing with its reason.
   */
  async openBlob(
    endpoint: Endpoint, ref: ImageRef, digest: string, auth?: AuthConfig, opts: { signal?: AbortSignal; stallMs?: number } = {},
  ): Promise<Readable> {
    const what = `blob ${digest} of ${ref.registry}/${ref.repository} from ${endpoint.url}`;
    const controller = new AbortController();
    const stallMs = opts.stallMs ?? 60_000;
    const stalled = () => controller.abort(new DeadlineExceeded(`${what}: stalled, no data for ${stallMs / 1000} s`));
    const timer = setTimeout(stalled, stallMs);
    const cancel = () => controller.abort(opts.signal!.reason);
    opts.signal?.addEventListener('abort', cancel, { once: true });
    const done = () => { clearTimeout(timer); opts.signal?.removeEventListener('abort', cancel); };
    let body: Readable;
    try {
      if (opts.signal?.aborted) throw opts.signal.reason;
      const res = await this.request(
        endpoint, ref.repository, `blobs/${digest}`, '*/*', this.credentials(endpoint, ref.registry, auth), controller.signal);
      body = res.body;
    } catch (err) {
      done();
      if (!(err instanceof EndpointError)) throw err;
      if (err.kind === 'notfound') throw new NotFound(`${what}: not found (${err.message})`);
      if (err.kind === 'denied') throw new PermissionDenied(`${what}: ${err.message}`);
      if (err.kind === 'unreachable') throw new Unavailable(`${what}: ${err.message}`);
      if (err.kind === 'limit') throw new ResourceExhausted(`${what}: ${err.message}`);
      throw new Internal(`${what}: ${err.message}`);
    }
    // Every chunk restarts the stall timer; an abort surfaces as its reason, not as a bare AbortError.
    const guard = new Transform({
      transform(chunk: Buffer, _e, cb) { timer.refresh(); cb(null, chunk); },
      flush(cb) { done(); cb(); },
    });
    // However the guard ends (its consumer gave up, a size or disk error), the connection under it goes too.
    guard.on('close', () => { done(); if (!body.destroyed) body.destroy(); });
    body.on('error', (err) => guard.destroy(controller.signal.aborted ? controller.signal.reason as Error : err));
    return body.pipe(guard);
  }

  /** GET /v2/<repository>/<path> with auth challenges answered, redirects followed and transient failures retried. */
  private async request(
    endpoint: Endpoint, repository: string, path: string, accept: string, auth?: AuthConfig, signal?: AbortSignal,
    method: 'GET' | 'HEAD' = 'GET',
  ): Promise<HttpAnswer> {
    const scope = pullScope(repository);
    // Tokens are cached per credential too: one pod's pull secret must not serve another pod's pull.
    const cacheKey = `${endpoint.url} ${scope} ${createHash('sha256').update(JSON.stringify(auth ?? {})).digest('hex')}`;
    const url = `${endpoint.url}/v2/${repository}/${path}`;
    let authorization = auth?.registryToken ? `Bearer ${auth.registryToken}` : this.authCache.get(cacheKey);
    for (let challenged = false; ;) {
      const res = await this.withRetries(url, () => this.get(url, accept, authorization, signal, method), signal);
      if (res.status >= 200 && res.status < 300) return res;
      const message = registryMessage(res.status, await this.errorBody(res));
      if (res.status === 401 && !challenged && !auth?.registryToken) {
        const header = res.headers.get('www-authenticate');
        const next = header ? await this.answerChallenge(header, scope, endpoint, auth, signal) : undefined;
        if (next) {
          challenged = true;
          authorization = next.header;
          this.authCache.set(cacheKey, next.header, next.ttlSeconds);
          continue;
        }
      }
      if (res.status === 404) throw new EndpointError('notfound', message);
      if (res.status === 401 || res.status === 403) {
        this.authCache.delete(cacheKey);
        throw new EndpointError('denied', `${res.status} ${message}`);
      }
      if (res.status >= 500 || res.status === 429) throw new EndpointError('unreachable', `${res.status} ${message}`);
      throw new EndpointError('bad', `${res.status} ${message}`, res.status);
    }
  }

  /** An error answer's body for its message: what fits in the response limit, the rest never read. */
  private async errorBody(res: HttpAnswer): Promise<string> {
    const read = await readCapped(res.body, this.limits.responseBytes).catch(() => undefined);
    return read ? read.bytes.toString('utf8') : '';
  }

  /** Follows redirects by hand so credentials never travel to another origin (blob storage redirects). */
  private async get(
    url: string, accept: string, authorization: string | undefined, signal?: AbortSignal, method: 'GET' | 'HEAD' = 'GET',
  ): Promise<HttpAnswer> {
    const origin = new URL(url).origin;
    let current = url;
    for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
      const headers: Record<string, string> = { accept, 'user-agent': 'minicri' };
      if (authorization && new URL(current).origin === origin) headers.authorization = authorization;
      const res = await this.fetchTls(current, { method, headers, signal });
      const location = res.headers.get('location');
      if (res.status >= 300 && res.status < 400 && location) {
        await res.discard().catch(() => undefined);
        current = new URL(location, current).toString();
        continue;
      }
      // A challenge from where a redirect led is not the registry's: its credentials are not offered there.
      if (res.status === 401 && new URL(current).origin !== origin) {
        await res.discard().catch(() => undefined);
        throw new EndpointError('denied', `401 from ${new URL(current).origin}, where ${origin} redirected: `
          + 'the registry\'s credentials are not sent to another host');
      }
      return res;
    }
    throw new EndpointError('bad', `more than ${MAX_REDIRECTS} redirects`);
  }

  /** A request with the TLS settings (certs.d, insecure) of the URL's host. */
  private async fetchTls(url: string | URL, init: HttpInit): Promise<HttpAnswer> {
    const target = new URL(url);
    const dispatcher = await this.tls.for(target, listedInsecure(target.host, this.opts.hosts.insecure));
    return this.transport(target, dispatcher ? { ...init, dispatcher } : init);
  }

  /**
   * `fn` again after HTTP 5xx/429 (the last such answer is returned) and transient network failures. At once:
   * an EndpointError for a refused connection, an unknown host or an untrusted certificate; typed errors as
   * they are (a bad certs.d); the signal's reason for a stall, a timeout or a cancelled pull.
   */
  private async withRetries(url: string, fn: () => Promise<HttpAnswer>, signal?: AbortSignal): Promise<HttpAnswer> {
    // A busy answer not yet discarded: a cancel that ends the retrying must not leave its connection held.
    let busy: HttpAnswer | undefined;
    try {
      return await retry(async () => {
        const res = await fn();
        if (res.status >= 500 || res.status === 429) throw new BusyAnswer(busy = res);
        return res;
      }, {
        attempts: this.attempts, signal,
        retryable: (err) => err instanceof BusyAnswer
          || !(err instanceof EndpointError || err instanceof MinicriError || this.untrusted(err)
            || /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH/.test(networkReason(err))),
        onRetry: async (err) => {
          if (err instanceof BusyAnswer) await err.res.discard().catch(() => undefined);
          busy = undefined;
          this.opts.log.debug({ url, reason: err instanceof BusyAnswer ? `HTTP ${err.res.status}` : networkReason(err) },
            'registry request failed, retrying');
        },
      });
    } catch (err) {
      if (err instanceof BusyAnswer) return err.res;
      await busy?.discard().catch(() => undefined);
      if (err instanceof EndpointError || err instanceof MinicriError) throw err;
      const reason = networkReason(err);
      const code = this.untrusted(err);
      if (code) {
        const host = new URL(url).host;
        const where = this.opts.hosts.certsDir ? `${this.opts.hosts.certsDir}/${host}/ca.crt` : `a certs.d directory for ${host}`;
        throw new EndpointError('unreachable', `TLS to ${host}: ${reason} (${code}): put the CA that signed its certificate in ${where}`);
      }
      // A refused connection or unknown host will not heal in a second; the next endpoint is tried.
      throw new EndpointError('unreachable', reason);
    }
  }

  /** The code of a certificate verification failure (retrying will not help, a CA in certs.d will), else undefined. */
  private untrusted(err: unknown): string | undefined {
    const e = err as { code?: string; cause?: { code?: string } };
    const code = e?.cause?.code ?? e?.code ?? '';
    return TLS_TRUST_ERROR.test(code) ? code : undefined;
  }

  /** Turns a 401 challenge into an Authorization header, or undefined when we have nothing to answer with. */
  private async answerChallenge(
    header: string, scope: string, endpoint: Endpoint, auth: AuthConfig | undefined, signal?: AbortSignal,
  ): Promise<{ header: string; ttlSeconds: number } | undefined> {
    const challenges = parseWwwAuthenticate(header);
    const creds = basicCredentials(auth);
    const bearer = challenges.find((c) => c.scheme === 'bearer');
    if (bearer) {
      const realm = bearer.params.realm;
      if (!realm) throw new EndpointError('bad', `bearer challenge without realm: ${header}`);
      const { token, expiresIn } = await this.fetchToken(
        realm, bearer.params.service, bearer.params.scope || scope, endpoint, auth, signal);
      // Renew a little before the registry would refuse it.
      return { header: `Bearer ${token}`, ttlSeconds: Math.max(expiresIn - 10, 5) };
    }
    if (challenges.some((c) => c.scheme === 'basic') && creds) return { header: basicHeader(creds), ttlSeconds: 300 };
    return undefined;
  }

  /**
   * The distribution token flow: GET with basic credentials (or anonymous), or OAuth2 POST with an identity
   * token. The realm may be another host (that is how the flow works), but credentials never go there in clear.
   */
  private async fetchToken(
    realm: string, service: string | undefined, scope: string, endpoint: Endpoint, auth: AuthConfig | undefined, signal?: AbortSignal,
  ): Promise<{ token: string; expiresIn: number }> {
    const url = new URL(realm);
    const origin = new URL(endpoint.url).origin;
    // Loopback is plain HTTP by default for a registry on this node, not for a token realm a remote registry names.
    const plainAllowed = listedInsecure(url.host, this.opts.hosts.insecure)
      || (isLoopbackHost(url.host) && isLoopbackHost(new URL(endpoint.url).host));
    if ((auth?.identityToken || basicCredentials(auth)) && url.protocol !== 'https:' && url.origin !== origin && !plainAllowed) {
      throw new EndpointError('denied', `token server ${url.origin} for ${endpoint.url} is plain HTTP on another host: `
        + 'credentials are not sent there (list it under registries.insecure to allow it)');
    }
    let res: HttpAnswer;
    try {
      if (auth?.identityToken) {
        const form = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: auth.identityToken, client_id: 'minicri', scope });
        if (service) form.set('service', service);
        res = await this.withRetries(
          url.toString(), () => this.fetchTls(url, { method: 'POST', form, headers: { 'user-agent': 'minicri' }, signal }), signal);
      } else {
        if (service) url.searchParams.set('service', service);
        url.searchParams.set('scope', scope);
        const creds = basicCredentials(auth);
        const headers: Record<string, string> = { 'user-agent': 'minicri' };
        if (creds) headers.authorization = basicHeader(creds);
        res = await this.withRetries(url.toString(), () => this.fetchTls(url, { headers, signal }), signal);
      }
    } catch (err) {
      if (err instanceof EndpointError) throw new EndpointError(err.kind, `token server ${url.origin} for ${endpoint.url}: ${err.message}`);
      throw err;
    }
    if (res.status < 200 || res.status >= 300) {
      const kind = res.status === 401 || res.status === 403 ? 'denied' : 'bad';
      const message = registryMessage(res.status, await this.errorBody(res));
      throw new EndpointError(kind, `token server ${url.origin} answered ${res.status} ${message}`);
    }
    const what = `the token from ${url.origin} for ${endpoint.url}`;
    const body = (await readLimited(res, this.limits.responseBytes, what, 'responseBytes')).toString('utf8');
    let token: unknown;
    let expiresIn: unknown;
    try {
      const doc = JSON.parse(body) as { token?: unknown; access_token?: unknown; expires_in?: unknown };
      token = doc.token ?? doc.access_token;
      expiresIn = doc.expires_in;
    } catch { /* reported below */ }
    if (typeof token !== 'string' || !token) throw new EndpointError('bad', `token server ${url.origin} returned no token`);
    // The distribution token spec's default lifetime is 60 seconds.
    return { token, expiresIn: typeof expiresIn === 'number' && expiresIn > 0 ? expiresIn : 60 };
  }
}

/** A body of at most `limit` bytes; a bigger one is refused, naming its limit, after reading no more than that. */
async function readLimited(
  res: HttpAnswer, limit: number, what: string, key: 'manifestBytes' | 'responseBytes' = 'manifestBytes',
): Promise<Buffer> {
  const declared = Number(res.headers.get('content-length') ?? 0);
  if (declared > limit) {
    res.body.destroy();
    throw new EndpointError('limit', overLimitMessage(what, key, limit, declared));
  }
  let read: { bytes: Buffer; over: boolean };
  try {
    read = await readCapped(res.body, limit);
  } catch (err) {
    throw new EndpointError('unreachable', `reading ${what}: ${networkReason(err)}`);
  }
  if (read.over) throw new EndpointError('limit', overLimitMessage(what, key, limit));
  return read.bytes;
}

/** The registry's own explanation from its JSON error body, else the HTTP status text. */
export function registryMessage(status: number, body: string): string {
  try {
    const doc = JSON.parse(body) as { errors?: Array<{ code?: string; message?: string; detail?: unknown }>; details?: string };
    const e = doc.errors?.[0];
    if (e) return [e.code, e.message].filter(Boolean).join(': ');
    if (doc.details) return doc.details;
  } catch { /* not JSON */ }
  const text = body.trim().slice(0, 200);
  return text || `HTTP ${status}`;
}

function networkReason(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  if (e?.cause?.message) return e.cause.message;
  return e?.message ?? String(err);
}

function explain(
  ref: ImageRef, reference: string, failures: Array<{ endpoint: Endpoint; err: EndpointError }>, mirrorsOnly: boolean,
): Error {
  const name = `${ref.registry}/${ref.repository}${reference.startsWith('sha256:') ? '@' : ':'}${reference}`;
  const tried = failures.map(({ endpoint, err }) => `${endpoint.mirror ? 'mirror ' : ''}${endpoint.url}: ${err.message}`).join('; ');
  const suffix = mirrorsOnly ? ` (registry ${ref.registry} is served by its mirrors only)` : '';
  if (failures.length === 0) {
    return new InvalidArgument(`no endpoint configured for registry ${ref.registry}: add a mirror or allow the registry itself`);
  }
  // The registry itself saying it has no such image settles it, whatever a mirror did.
  if (failures.every((f) => f.err.kind === 'notfound') || failures.some((f) => !f.endpoint.mirror && f.err.kind === 'notfound')) {
    return new NotFound(`image "${name}" not found in registry ${ref.registry} (tried ${tried})${suffix}: check the name and tag`);
  }
  if (failures.some((f) => f.err.kind === 'limit')) {
    return new ResourceExhausted(`pulling "${name}" from registry ${ref.registry} was stopped at a limit (tried ${tried})${suffix}`);
  }
  const denied = failures.find((f) => f.err.kind === 'denied');
  if (denied) {
    return new PermissionDenied(
      `pulling "${name}" from registry ${ref.registry} was refused (tried ${tried})${suffix}: check the pull credentials`);
  }
  if (failures.every((f) => ['unreachable', 'timeout', 'notfound'].includes(f.err.kind))) {
    if (failures.some((f) => f.err.kind === 'timeout')) {
      return new DeadlineExceeded(`registry ${ref.registry} did not serve "${name}" in time (tried ${tried})${suffix}`);
    }
    return new Unavailable(`cannot reach registry ${ref.registry} for "${name}" (tried ${tried})${suffix}`);
  }
  return new Internal(`pulling "${name}" from registry ${ref.registry} failed (tried ${tried})${suffix}`);
}
