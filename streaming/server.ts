// The streaming HTTP server kubelet sends clients to: GET /<verb>/<token> upgraded to SPDY/3.1 or
// WebSocket. The CRI call validated the request and issued the token; here it is redeemed once and
// the session runs against the backend. Bounded: concurrent sessions on the node and per container,
// idle connections, and within a session what limits.ts lists.
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { createWebSocketStream, WebSocketServer, type WebSocket } from 'ws';
import type { SessionStdio } from '../core/stdio.js';
import type { Logger } from '../core/log.js';
import { DEFAULT_LIMITS, limitMessage, type StreamingLimits } from './limits.js';
import { spdyPortForward, wsPortForward, type PodConnector } from './port-forward.js';
import {
  errorStatus, exitCodeStatus, negotiate, parsePorts, protocolVersion, SPDY_EXEC_PROTOCOLS, SPDY_PORTFORWARD_PROTOCOLS, successStatus,
  WS_EXEC_PROTOCOLS, WS_PORTFORWARD_PROTOCOLS, WS_SPDY_TUNNEL_PROTOCOL, type Status, type Verb,
} from './protocol.js';
import { spdyRemoteCommand, wsRemoteCommand, type RemoteCommand, type StdioOptions } from './remote-command.js';
import { SpdySession } from './spdy.js';
import { TokenCache } from './tokens.js';

export type StreamRequest =
  | ({ verb: 'exec'; containerId: string; cmd: string[] } & StdioOptions)
  | ({ verb: 'attach'; containerId: string } & StdioOptions)
  | { verb: 'portforward'; sandboxId: string; ports: number[] };

/** What sessions run against; the daemon implements it over its runtime and records. */
export interface StreamingBackend {
  /** Runs the command; resolves with its exit code. */
  exec(req: Extract<StreamRequest, { verb: 'exec' }>, io: SessionStdio): Promise<number>;
  attach(req: Extract<StreamRequest, { verb: 'attach' }>, io: SessionStdio): Promise<void>;
  /** A connector into the sandbox's network namespace (throws when the sandbox is gone). */
  portForward(req: Extract<StreamRequest, { verb: 'portforward' }>): Promise<PodConnector>;
}

export interface StreamingServerOptions {
  address: string;
  port: number;
  idleTimeoutMs: number;
  /** Those not given are DEFAULT_LIMITS'. */
  limits?: Partial<StreamingLimits>;
  /** How long a client has to open its streams after the upgrade (kubelet: 30 s). */
  streamCreationTimeoutMs?: number;
  backend: StreamingBackend;
  log: Logger;
}

/** Issues URLs for validated requests (what the CRI handlers need of the server). */
export interface StreamingEndpoint {
  url(req: StreamRequest): string;
}

export class StreamingServer implements StreamingEndpoint {
  private readonly tokens = new TokenCache<StreamRequest>();
  /**
   * The subprotocol chosen for each WebSocket upgrade. We answer it ourselves ('headers' below): ws
   * refuses offers that are not HTTP tokens, and kubectl's SPDY/3.1+portforward.k8s.io has a '/'.
   */
  private readonly chosen = new WeakMap<IncomingMessage, string>();
  private readonly wss: WebSocketServer;
  private readonly sockets = new Set<Duplex>();
  private readonly limits: StreamingLimits;
  private active = 0;
  /** Open sessions per container (exec, attach) or pod sandbox (port-forward). */
  private readonly perTarget = new Map<string, number>();
  private baseUrl = '';

  private constructor(private readonly http: Server, private readonly opts: StreamingServerOptions) {
    this.limits = { ...DEFAULT_LIMITS, ...opts.limits };
    // A message is one SPDY frame (tunneled port-forward) or a channel byte and a piece of a stream:
    // a little room over the frame limit for the frame's header.
    this.wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: this.limits.maxFrameBytes + 1024 });
    this.wss.on('headers', (headers, req) => {
      const protocol = this.chosen.get(req);
      if (protocol) headers.push(`Sec-WebSocket-Protocol: ${protocol}`);
    });
  }

  static async start(opts: StreamingServerOptions): Promise<StreamingServer> {
    const http = createServer();
    const s = new StreamingServer(http, opts);
    http.on('request', (req, res) => s.onRequest(req, res));
    http.on('upgrade', (req, socket, head) => s.onUpgrade(req, socket, head));
    http.listen(opts.port, opts.address);
    await Promise.race([once(http, 'listening'), once(http, 'error').then(([err]) => { throw err; })]);
    const a = http.address() as AddressInfo;
    s.baseUrl = `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;
    opts.log.info({ url: s.baseUrl }, 'streaming server listening');
    return s;
  }

  get address(): AddressInfo {
    return this.http.address() as AddressInfo;
  }

  get activeSessions(): number {
    return this.active;
  }

  url(req: StreamRequest): string {
    return `${this.baseUrl}/${req.verb}/${this.tokens.issue(req)}`;
  }

  /** Stops listening and ends every session (their processes are killed through the abort signals). */
  async stop(): Promise<void> {
    const closed = new Promise((resolve) => this.http.close(resolve));
    for (const s of this.sockets) s.destroy();
    this.http.closeAllConnections();
    await closed;
  }

  private route(url: string | undefined): { verb: Verb; token: string; query: URLSearchParams } | undefined {
    const u = new URL(url ?? '/', 'http://x');
    const m = /^\/(exec|attach|portforward)\/([A-Za-z0-9_-]+)$/.exec(u.pathname);
    return m ? { verb: m[1] as Verb, token: m[2]!, query: u.searchParams } : undefined;
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    const r = this.route(req.url);
    // A plain request cannot stream; leave its token for the real upgrade.
    res.writeHead(r ? 400 : 404, { 'content-type': 'text/plain' });
    res.end(r ? 'upgrade to SPDY/3.1 or WebSocket required\n' : 'not found\n');
  }

  private onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => undefined);
    // Upgraded connections are no longer the HTTP server's to close: track them until they end.
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    const r = this.route(req.url);
    // Refusals for the protocol or the load leave the token valid: the client may retry (kubectl falls
    // back from WebSocket to SPDY). Only an accepted upgrade uses it up.
    const request = r ? this.tokens.peek(r.token) : undefined;
    if (!r || !request || request.verb !== r.verb) return reject(socket, 404, 'Not Found', 'unknown, used or expired streaming token');
    const refusal = this.overLimit(request);
    if (refusal) return reject(socket, 429, 'Too Many Requests', refusal);
    // The session's slots are taken with its token, before any await, so racing upgrades cannot pass
    // a limit together; they are given back when the session ends or the upgrade fails.
    let release: (() => void) | undefined;
    let started = false;
    const accept = () => {
      if (this.tokens.take(r.token) === undefined) return false;
      release = this.occupy(request);
      socket.once('close', () => { if (!started) release!(); });
      return true;
    };
    const run = (t: Parameters<StreamingServer['runSession']>[1]) => {
      started = true;
      void this.runSession(request, t).finally(release);
    };
    const upgrade = (req.headers.upgrade ?? '').toLowerCase();
    if (upgrade === 'websocket') {
      const ours = request.verb === 'portforward' ? WS_PORTFORWARD_PROTOCOLS : WS_EXEC_PROTOCOLS;
      const offered = req.headers['sec-websocket-protocol'];
      const protocol = negotiate(offered, ours) ?? (offered ? undefined : 'channel.k8s.io');
      if (!protocol) return reject(socket, 403, 'Forbidden', `no supported WebSocket subprotocol offered (supported: ${ours.join(', ')})`);
      if (!accept()) return reject(socket, 404, 'Not Found', 'streaming token already used');
      this.chosen.set(req, protocol);
      delete req.headers['sec-websocket-protocol'];
      this.wss.handleUpgrade(req, socket, head, (ws) => run({ socket, kind: 'ws', ws, protocol, query: r.query }));
      return;
    }
    if (upgrade !== 'spdy/3.1') return reject(socket, 400, 'Bad Request', 'upgrade to SPDY/3.1 or websocket required');
    const ours = request.verb === 'portforward' ? SPDY_PORTFORWARD_PROTOCOLS : SPDY_EXEC_PROTOCOLS;
    const offered = req.headers['x-stream-protocol-version'];
    const protocol = negotiate(offered, ours) ?? (offered ? undefined : ours[ours.length - 1]!);
    if (!protocol) return reject(socket, 403, 'Forbidden', `unable to negotiate a stream protocol (supported: ${ours.join(', ')})`);
    if (!accept()) return reject(socket, 404, 'Not Found', 'streaming token already used');
    socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n'
      + `X-Stream-Protocol-Version: ${protocol}\r\n\r\n`);
    if (head.length) socket.unshift(head);
    run({ socket, kind: 'spdy', session: this.spdySession(socket), protocol });
  }

  private spdySession(socket: Duplex): SpdySession {
    const { maxFrameBytes, inputBufferBytes } = this.limits;
    const session = new SpdySession(socket, { client: false, maxFramePayload: maxFrameBytes, inputBufferBytes });
    session.once('failure', (err) => {
      this.opts.log.info({ err: err.message }, 'SPDY session closed: the client broke the protocol or a limit');
    });
    return session;
  }

  /** Why a session for `request` may not start now (HTTP 429), or undefined. */
  private overLimit(request: StreamRequest): string | undefined {
    if (this.active >= this.limits.maxSessions) {
      return limitMessage(this.limits, 'maxSessions', `${this.active} streaming sessions are open on this node`);
    }
    const open = this.perTarget.get(targetKey(request)) ?? 0;
    if (open >= this.limits.maxSessionsPerTarget) {
      const target = request.verb === 'portforward' ? `pod sandbox ${request.sandboxId}` : `container ${request.containerId}`;
      return limitMessage(this.limits, 'maxSessionsPerTarget', `${open} streaming sessions are open to ${target}`);
    }
    return undefined;
  }

  /** Counts a session against the limits; returns its release (safe to call more than once). */
  private occupy(request: StreamRequest): () => void {
    const key = targetKey(request);
    this.active++;
    this.perTarget.set(key, (this.perTarget.get(key) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.active--;
      const left = this.perTarget.get(key)! - 1;
      if (left === 0) this.perTarget.delete(key);
      else this.perTarget.set(key, left);
    };
  }

  private async runSession(
    request: StreamRequest,
    t: { socket: Duplex } & (
      | { kind: 'spdy'; session: SpdySession; protocol: string }
      | { kind: 'ws'; ws: WebSocket; protocol: string; query: URLSearchParams }
    ),
  ): Promise<void> {
    const { socket } = t;
    const started = Date.now();
    const target = request.verb === 'portforward' ? { sandboxId: request.sandboxId } : { containerId: request.containerId };
    const log = this.opts.log.child({ verb: request.verb, ...target, transport: t.kind, protocol: t.protocol });
    // Idle connections are cut; the abort signal then ends the session's processes.
    const idle = () => { log.info({ idleMs: this.opts.idleTimeoutMs }, 'streaming session idle: closing it'); socket.destroy(); };
    (socket as Duplex & { setTimeout?(ms: number, cb: () => void): void }).setTimeout?.(this.opts.idleTimeoutMs, idle);
    let outcome: Record<string, unknown> = {};
    try {
      if (request.verb === 'portforward') {
        const connect = await this.opts.backend.portForward(request);
        if (t.kind === 'spdy') await spdyPortForward(t.session, connect, this.limits, log);
        else if (t.protocol === WS_SPDY_TUNNEL_PROTOCOL) {
          await spdyPortForward(this.spdySession(createWebSocketStream(t.ws)), connect, this.limits, log);
        }
        else {
          const fromQuery = parsePorts(t.query.getAll('port'));
          if (typeof fromQuery === 'string') {
            t.ws.close(1008, fromQuery.slice(0, 120));
            throw new Error(fromQuery);
          }
          const ports = fromQuery.length ? fromQuery : request.ports;
          await wsPortForward(t.ws, ports, t.protocol.includes('base64'), connect, this.limits, log);
        }
      } else {
        const version = protocolVersion(t.protocol);
        const rc: RemoteCommand = t.kind === 'spdy'
          ? await spdyRemoteCommand(t.session, version, request, this.opts.streamCreationTimeoutMs ?? 30_000, this.limits)
          : wsRemoteCommand(t.ws, version, t.protocol.includes('base64'), request, this.limits);
        let status: Status;
        try {
          if (request.verb === 'exec') {
            const exitCode = await this.opts.backend.exec(request, rc.io);
            outcome = { exitCode };
            status = exitCode === 0 ? successStatus() : exitCodeStatus(request.cmd, exitCode);
          } else {
            await this.opts.backend.attach(request, rc.io);
            status = successStatus();
          }
        } catch (err) {
          outcome = { err };
          status = errorStatus((err as Error).message);
        }
        if (!rc.io.signal.aborted) await rc.finish(status);
        else outcome = { ...outcome, clientGone: true };
      }
    } catch (err) {
      outcome = { err };
      if (t.kind === 'spdy') t.session.destroy();
      else t.ws.terminate();
    } finally {
      log.info({ ms: Date.now() - started, ...outcome }, 'streaming session ended');
    }
  }
}

function targetKey(request: StreamRequest): string {
  return request.verb === 'portforward' ? `sandbox/${request.sandboxId}` : `container/${request.containerId}`;
}

function reject(socket: Duplex, code: number, reason: string, message: string): void {
  socket.end(`HTTP/1.1 ${code} ${reason}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(message) + 1}\r\n`
    + `Connection: close\r\n\r\n${message}\n`);
}
