// Exec and attach over either transport: turn a SPDY session or a WebSocket into the session's
// stdio (SessionStdio) and report the outcome on the error stream.
import { once } from 'node:events';
import type { Readable, Writable } from 'node:stream';
import type { WebSocket } from 'ws';
import { TerminalSizes, type SessionStdio, type TerminalSize } from '../core/stdio.js';
import { ClientInput } from './client-input.js';
import { protocolFailureMessage, type StreamingLimits } from './limits.js';
import {
  CH_CLOSE, CH_ERROR, CH_RESIZE, CH_STDERR, CH_STDIN, CH_STDOUT, decodeChannelMessage, encodeChannelMessage, encodeStatus, errorStatus,
  ResizeDecoder, type Status,
} from './protocol.js';
import type { SpdySession, SpdyStream } from './spdy.js';
import { channelWriter, wsInputBudget } from './ws-channels.js';

export interface StdioOptions {
  stdin: boolean;
  stdout: boolean;
  stderr: boolean;
  tty: boolean;
}

/** A connected client: its stdio, and how to report the outcome and hang up. */
export interface RemoteCommand {
  io: SessionStdio;
  finish(status: Status): Promise<void>;
}

/** The stream types a client of protocol `version` opens for these options (kubelet's expectation). */
export function expectedStreams(o: StdioOptions, version: number): string[] {
  const types = ['error'];
  if (o.stdin) types.push('stdin');
  if (o.stdout) types.push('stdout');
  if (o.stderr && !o.tty) types.push('stderr');
  if (o.tty && version >= 3) types.push('resize');
  return types;
}

/**
 * Waits until the client has opened every stream it should (within timeoutMs), accepting each.
 * Rejects when the client hangs up or is too slow. A session closed for breaking a limit says why on
 * its error stream.
 */
export async function spdyRemoteCommand(
  session: SpdySession, version: number, o: StdioOptions, timeoutMs: number, limits: StreamingLimits,
): Promise<RemoteCommand> {
  const expected = new Set(expectedStreams(o, version));
  const streams = new Map<string, SpdyStream>();
  session.once('failure', (err) => {
    const error = streams.get('error');
    if (error && !error.writableEnded) error.end(encodeStatus(errorStatus(protocolFailureMessage(err, limits)), version));
  });
  await new Promise<void>((resolve, reject) => {
    const opened = () => `the client opened only [${[...streams.keys()].join(', ')}] of the streams [${[...expected].join(', ')}]`;
    const timer = setTimeout(() => done(new Error(`${opened()} within ${timeoutMs} ms`)), timeoutMs);
    const onClose = () => done(new Error('the client hung up before opening its streams'));
    const onStream = (s: SpdyStream) => {
      const type = s.headers.streamtype ?? '';
      if (!expected.has(type) || streams.has(type)) {
        s.reset();
        return;
      }
      void s.reply().catch(() => undefined);
      streams.set(type, s);
      if (streams.size === expected.size) done();
    };
    function done(err?: Error) {
      clearTimeout(timer);
      session.off('stream', onStream);
      session.off('close', onClose);
      if (err) reject(err);
      else resolve();
    }
    session.on('stream', onStream);
    session.on('close', onClose);
  });

  const abort = new AbortController();
  session.once('close', () => abort.abort());
  const resize = new TerminalSizes();
  const resizeStream = streams.get('resize');
  if (resizeStream) {
    const decoder = new ResizeDecoder();
    resizeStream.on('data', (b: Buffer) => pushNewest(resize, decoder.push(b)));
    resizeStream.on('error', () => undefined);
  }
  for (const s of streams.values()) s.on('error', () => undefined);
  const stdin = streams.get('stdin') ?? null;
  const stdout = streams.get('stdout') ?? null;
  const stderr = streams.get('stderr') ?? null;
  // The client has nothing to say on the streams we write: whatever it sends there is dropped, not held.
  for (const s of [streams.get('error'), stdout, stderr]) s?.resume();
  return {
    io: { stdin, stdout, stderr, resize, signal: abort.signal },
    finish: async (status) => {
      if (session.isClosed) return;
      const error = streams.get('error')!;
      const ends = [stdout, stderr].filter((s): s is SpdyStream => s !== null).map((s) => endStream(s));
      await Promise.all(ends);
      const msg = encodeStatus(status, version);
      await endStream(error, msg.length ? msg : undefined);
      await session.close();
    },
  };
}

/** Of the sizes one read decoded, only the last matters: the earlier ones are outdated already. */
function pushNewest(resize: TerminalSizes, sizes: TerminalSize[]): void {
  const newest = sizes.at(-1);
  if (newest) resize.push(newest);
}

function endStream(s: Writable, last?: Buffer): Promise<void> {
  // Already ended: by the failure report, or by an earlier finish.
  if (s.writableEnded || s.destroyed) return Promise.resolve();
  const finished = once(s, 'finish').then(() => undefined, () => undefined);
  s.end(last);
  return finished;
}

/**
 * Exec/attach over a WebSocket using the channel protocol (`version` 5 adds the close signal). stdin the
 * process does not take pauses the WebSocket past `inputBufferBytes`.
 */
export function wsRemoteCommand(ws: WebSocket, version: number, base64: boolean, o: StdioOptions, limits: StreamingLimits): RemoteCommand {
  const abort = new AbortController();
  const resize = new TerminalSizes();
  const decoder = new ResizeDecoder();
  const stdin = o.stdin ? new ClientInput(wsInputBudget(ws, limits.inputBufferBytes)) : null;
  const stdout = o.stdout ? channelWriter(ws, CH_STDOUT, base64) : null;
  const stderr = o.stderr && !o.tty ? channelWriter(ws, CH_STDERR, base64) : null;
  for (const w of [stdout, stderr]) w?.on('error', () => undefined);
  ws.on('message', (raw: Buffer, isBinary: boolean) => {
    const m = decodeChannelMessage(isBinary ? raw : raw.toString(), base64);
    if (!m) return;
    if (m.channel === CH_STDIN) stdin?.add(m.data);
    else if (m.channel === CH_RESIZE) pushNewest(resize, decoder.push(m.data));
    else if (m.channel === CH_CLOSE && version >= 5 && m.data[0] === CH_STDIN) stdin?.finish();
  });
  ws.on('close', () => {
    // The session ends with the client (the abort): what it sent and nobody took is dropped.
    stdin?.destroy();
    abort.abort();
  });
  ws.on('error', () => undefined);
  return {
    io: { stdin: stdin as Readable | null, stdout, stderr, resize, signal: abort.signal },
    finish: async (status) => {
      await Promise.all([stdout, stderr].filter((s): s is Writable => s !== null).map((s) => endStream(s)));
      if (ws.readyState === ws.OPEN) {
        const msg = encodeStatus(status, version);
        if (msg.length) await new Promise<void>((resolve) => ws.send(encodeChannelMessage(CH_ERROR, msg, base64), () => resolve()));
        ws.close(1000);
      }
    },
  };
}
