// The Kubernetes side of streaming, pure: subprotocol negotiation, the metav1.Status the error
// stream carries, terminal-size messages and the WebSocket channel framing.
import type { TerminalSize } from '../core/stdio.js';

export type Verb = 'exec' | 'attach' | 'portforward';

/** Remote-command subprotocols over SPDY, best first (kubelet's order). */
export const SPDY_EXEC_PROTOCOLS = [
  'v5.channel.k8s.io', 'v4.channel.k8s.io', 'v3.channel.k8s.io', 'v2.channel.k8s.io', 'channel.k8s.io',
] as const;
export const SPDY_PORTFORWARD_PROTOCOLS = ['portforward.k8s.io'] as const;
/** WebSocket subprotocols: v5/v4 channel framing, optionally base64 text frames. */
export const WS_EXEC_PROTOCOLS = [
  'v5.channel.k8s.io', 'v4.channel.k8s.io', 'v4.base64.channel.k8s.io', 'base64.channel.k8s.io', 'channel.k8s.io',
] as const;
/** SPDY tunneled in WebSocket binary messages (kubectl 1.31+ port-forward), then the channel protocols. */
export const WS_SPDY_TUNNEL_PROTOCOL = 'SPDY/3.1+portforward.k8s.io';
export const WS_PORTFORWARD_PROTOCOLS = [
  WS_SPDY_TUNNEL_PROTOCOL, 'v4.channel.k8s.io', 'v4.base64.channel.k8s.io', 'channel.k8s.io', 'base64.channel.k8s.io',
] as const;

/**
 * The first of our protocols (in our order of preference) the client offers, or undefined.
 * `offered` is the raw header: comma-separated, possibly repeated.
 */
export function negotiate(offered: string | string[] | undefined, ours: readonly string[]): string | undefined {
  const list = (Array.isArray(offered) ? offered.join(',') : offered ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  return ours.find((p) => list.includes(p));
}

/** Remote-command protocol generation: 1 for channel.k8s.io, else the vN prefix. */
export function protocolVersion(protocol: string): number {
  const m = /^v(\d+)\./.exec(protocol);
  return m ? Number(m[1]) : 1;
}

export interface Status {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Success' | 'Failure';
  message?: string;
  reason?: string;
  details?: { causes: { reason: string; message: string }[] };
}

export function successStatus(): Status {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success' };
}

/** What kubectl turns into its own exit code: reason NonZeroExitCode with an ExitCode cause. */
export function exitCodeStatus(cmd: string[], exitCode: number): Status {
  return {
    kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure',
    message: `command terminated with non-zero exit code: command ${JSON.stringify(cmd)} exited with ${exitCode}`,
    reason: 'NonZeroExitCode',
    details: { causes: [{ reason: 'ExitCode', message: String(exitCode) }] },
  };
}

export function errorStatus(message: string): Status {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason: 'InternalError' };
}

/**
 * The bytes for the error stream. v4+ speaks JSON Status; older protocols carry only a message and
 * nothing at all on success.
 */
export function encodeStatus(status: Status, version: number): Buffer {
  if (version >= 4) return Buffer.from(JSON.stringify(status));
  return Buffer.from(status.status === 'Success' ? '' : status.message ?? 'error');
}

/**
 * Splits a resize stream into its JSON objects ({"Width":80,"Height":24} back to back, as Go's
 * json.Encoder writes them). Feed chunks; complete sizes come out, a partial object waits.
 */
export class ResizeDecoder {
  private buf = '';

  push(chunk: Buffer | string): TerminalSize[] {
    this.buf += chunk.toString();
    const out: TerminalSize[] = [];
    let depth = 0;
    let inString = false;
    let start = -1;
    let consumed = 0;
    for (let i = 0; i < this.buf.length; i++) {
      const c = this.buf[i];
      if (inString) {
        if (c === '\\') i++;
        else if (c === '"') inString = false;
      } else if (c === '"') inString = true;
      else if (c === '{') {
        if (depth++ === 0) start = i;
      } else if (c === '}' && depth > 0 && --depth === 0) {
        const size = parseSize(this.buf.slice(start, i + 1));
        if (size) out.push(size);
        consumed = i + 1;
      }
    }
    this.buf = this.buf.slice(consumed);
    if (this.buf.length > 4096) this.buf = ''; // not a resize stream: do not grow without bound
    return out;
  }
}

function parseSize(json: string): TerminalSize | undefined {
  try {
    const v = JSON.parse(json) as { Width?: unknown; Height?: unknown };
    const width = Number(v.Width);
    const height = Number(v.Height);
    const valid = (n: number) => Number.isInteger(n) && n >= 0 && n <= 0xffff;
    if (!valid(width) || !valid(height)) return undefined;
    return { width, height };
  } catch {
    return undefined;
  }
}

/** WebSocket channel numbers of the remote-command protocol. */
export const CH_STDIN = 0;
export const CH_STDOUT = 1;
export const CH_STDERR = 2;
export const CH_ERROR = 3;
export const CH_RESIZE = 4;
/** v5: the client closed the channel named by the next byte. */
export const CH_CLOSE = 255;

/** One WebSocket message: channel byte then payload; base64 protocols send the channel as a digit and base64 text. */
export function encodeChannelMessage(channel: number, data: Buffer, base64: boolean): Buffer | string {
  if (base64) return String.fromCharCode(48 + channel) + data.toString('base64');
  return Buffer.concat([Buffer.from([channel]), data]);
}

export function decodeChannelMessage(msg: Buffer | string, base64: boolean): { channel: number; data: Buffer } | undefined {
  if (base64) {
    const s = typeof msg === 'string' ? msg : msg.toString('latin1');
    if (s.length === 0) return undefined;
    return { channel: s.charCodeAt(0) - 48, data: Buffer.from(s.slice(1), 'base64') };
  }
  const b = typeof msg === 'string' ? Buffer.from(msg) : msg;
  if (b.length === 0) return undefined;
  return { channel: b[0]!, data: b.subarray(1) };
}

/** Port-forward over WebSocket opens each channel with the port, 16-bit little endian. */
export function portPrefix(port: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(port, 0);
  return b;
}

/** The ports of a port-forward URL query (`?port=80&port=8080`), or an error naming the bad one. */
export function parsePorts(values: string[]): number[] | string {
  const ports: number[] = [];
  for (const v of values) {
    for (const p of v.split(',')) {
      const n = Number(p);
      if (!/^\d+$/.test(p) || n < 1 || n > 65535) return `invalid port "${p}": ports are 1-65535`;
      ports.push(n);
    }
  }
  return ports;
}
