// Clients for the streaming server as kubectl and crictl speak to it: SPDY/3.1 (our own codec, in
// client mode) and WebSocket (the `ws` package).
import { once } from 'node:events';
import { request } from 'node:http';
import type { Socket } from 'node:net';
import WebSocket from 'ws';
import { SpdySession, type SpdyStream } from '../../streaming/spdy.js';

export interface SpdyConnection {
  session: SpdySession;
  socket: Socket;
  protocol: string;
}

export class UpgradeRefused extends Error {
  constructor(readonly status: number, readonly body: string) {
    super(`upgrade refused with HTTP ${status}: ${body}`);
  }
}

/** Upgrades `url` to SPDY/3.1 offering `protocols`; rejects with UpgradeRefused on any other answer. */
export function spdyConnect(url: string, protocols: string[]): Promise<SpdyConnection> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: 'POST',
      headers: { connection: 'Upgrade', upgrade: 'SPDY/3.1', 'x-stream-protocol-version': protocols },
    });
    req.on('upgrade', (res, socket: Socket, head: Buffer) => {
      if (head.length) socket.unshift(head);
      resolve({ session: new SpdySession(socket, { client: true }), socket, protocol: String(res.headers['x-stream-protocol-version'] ?? '') });
    });
    req.on('response', (res) => {
      let body = '';
      res.on('data', (c: Buffer) => { body += c.toString(); });
      res.on('end', () => reject(new UpgradeRefused(res.statusCode ?? 0, body.trim())));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Everything a stream delivers until its end, as text. */
export function readAll(s: NodeJS.ReadableStream): Promise<string> {
  const parts: Buffer[] = [];
  s.on('data', (b: Buffer) => parts.push(b));
  return new Promise((resolve, reject) => {
    s.once('end', () => resolve(Buffer.concat(parts).toString()));
    s.once('error', reject);
    s.once('close', () => resolve(Buffer.concat(parts).toString()));
  });
}

/** Reads a stream until `pattern` shows up in what came so far; returns that text. */
export function readUntil(s: NodeJS.ReadableStream, pattern: RegExp, timeoutMs = 10_000): Promise<string> {
  let text = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { s.off('data', onData); reject(new Error(`did not see ${pattern} within ${timeoutMs} ms; got ${JSON.stringify(text)}`)); }, timeoutMs);
    const onData = (b: Buffer) => {
      text += b.toString();
      if (pattern.test(text)) {
        clearTimeout(timer);
        s.off('data', onData);
        resolve(text);
      }
    };
    s.on('data', onData);
  });
}

export interface RemoteCommandStreams {
  conn: SpdyConnection;
  error: SpdyStream;
  stdin?: SpdyStream;
  stdout?: SpdyStream;
  stderr?: SpdyStream;
  resize?: SpdyStream;
}

/** Opens the streams of an exec/attach session the way client-go does (error first). */
export async function spdyRemoteCommand(url: string, o: { stdin?: boolean; stdout?: boolean; stderr?: boolean; tty?: boolean; protocols?: string[] }): Promise<RemoteCommandStreams> {
  const conn = await spdyConnect(url, o.protocols ?? ['v4.channel.k8s.io']);
  const open = (streamtype: string) => conn.session.openStream({ streamtype });
  const error = await open('error');
  const result: RemoteCommandStreams = { conn, error };
  if (o.stdin) result.stdin = await open('stdin');
  if (o.stdout ?? true) result.stdout = await open('stdout');
  if (o.stderr && !o.tty) result.stderr = await open('stderr');
  if (o.tty) result.resize = await open('resize');
  return result;
}

export interface SpdyExecResult {
  stdout: string;
  stderr: string;
  /** The error stream's content: a JSON Status for v4+. */
  error: string;
}

/** A whole non-interactive session: optional stdin (then half-closed), collected output. */
export async function spdyExec(url: string, o: { stdin?: string; stderr?: boolean; protocols?: string[] } = {}): Promise<SpdyExecResult> {
  const s = await spdyRemoteCommand(url, { stdin: o.stdin !== undefined, stdout: true, stderr: o.stderr ?? true, protocols: o.protocols });
  const out = readAll(s.stdout!);
  const err = s.stderr ? readAll(s.stderr) : Promise.resolve('');
  const error = readAll(s.error);
  if (s.stdin) s.stdin.end(o.stdin);
  const result = { stdout: await out, stderr: await err, error: await error };
  s.conn.session.destroy();
  return result;
}

export interface WsSession {
  ws: WebSocket;
  protocol: string;
  /** Every message's payload per channel, in order. */
  channels: Map<number, Buffer[]>;
  closed: Promise<void>;
}

/** Opens a WebSocket session (binary channel framing) and records what arrives per channel. */
export async function wsConnect(url: string, protocols: string[]): Promise<WsSession> {
  const ws = new WebSocket(url.replace(/^http/, 'ws'), protocols);
  const channels = new Map<number, Buffer[]>();
  ws.on('message', (data: Buffer) => {
    if (data.length === 0) return;
    const list = channels.get(data[0]!) ?? [];
    list.push(data.subarray(1));
    channels.set(data[0]!, list);
  });
  const closed = once(ws, 'close').then(() => undefined);
  await Promise.race([once(ws, 'open'), once(ws, 'unexpected-response').then(([, res]) => { throw new UpgradeRefused((res as { statusCode: number }).statusCode, ''); })]);
  return { ws, protocol: ws.protocol, channels, closed };
}

export function channelText(s: WsSession, channel: number): string {
  return Buffer.concat(s.channels.get(channel) ?? []).toString();
}

/** Sends `data` on a channel (binary framing). */
export function wsSend(s: WsSession, channel: number, data: Buffer | string): void {
  s.ws.send(Buffer.concat([Buffer.from([channel]), Buffer.from(data)]));
}
