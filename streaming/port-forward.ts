// Port forwarding over either transport. Each forwarded connection is one pod-side TCP connection
// (opened by `connect`); a connection that fails reports on its error stream or channel and leaves
// the session's other connections alone.
import type { ChildProcess } from 'node:child_process';
import { PassThrough, Writable } from 'node:stream';
import type { WebSocket } from 'ws';
import type { Logger } from '../core/log.js';
import { decodeChannelMessage, encodeChannelMessage, portPrefix } from './protocol.js';
import type { SpdySession, SpdyStream } from './spdy.js';

/** Opens a connection to localhost:<port> in the pod: a process reading stdin and writing stdout. */
export type PodConnector = (port: number) => ChildProcess;

/** How long the client has to open the second stream of a data/error pair. */
const PAIR_TIMEOUT_MS = 30_000;

function describeFailure(port: number, stderr: Buffer[], code: number | null): string {
  const why = Buffer.concat(stderr).toString().trim() || `exit status ${code}`;
  return `error forwarding port ${port} to the pod: ${why}`;
}

/** Copies between one pod connection and a client's byte streams; calls `failed` with a message if it could not connect. */
function forward(connect: PodConnector, port: number, input: NodeJS.ReadableStream, output: NodeJS.WritableStream, failed: (msg: string) => void, log: Logger): ChildProcess {
  const child = connect(port);
  const stderr: Buffer[] = [];
  child.stderr!.on('data', (b: Buffer) => stderr.push(b));
  child.stdin!.on('error', () => undefined);
  input.pipe(child.stdin!);
  child.stdout!.pipe(output as NodeJS.WritableStream, { end: false });
  child.once('error', (err) => failed(`error forwarding port ${port}: ${err.message}`));
  child.once('close', (code) => {
    input.unpipe(child.stdin!);
    if (code !== 0) {
      log.debug({ port, code }, 'port-forward connection failed');
      failed(describeFailure(port, stderr, code));
    }
  });
  return child;
}

/**
 * SPDY port forwarding: the client opens an error and a data stream per connection, tied by their
 * requestid header and naming the port. Runs until the client hangs up.
 */
export function spdyPortForward(session: SpdySession, connect: PodConnector, log: Logger): Promise<void> {
  const pairs = new Map<string, { error?: SpdyStream; data?: SpdyStream; timer: NodeJS.Timeout }>();
  const children = new Set<ChildProcess>();
  const start = (id: string) => {
    const p = pairs.get(id)!;
    clearTimeout(p.timer);
    pairs.delete(id);
    const data = p.data!;
    const error = p.error!;
    const port = Number(data.headers.port);
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      error.end(`invalid port "${data.headers.port}"`);
      data.end();
      return;
    }
    const child = forward(connect, port, data, data, (msg) => { if (!error.writableEnded) error.end(msg); }, log);
    children.add(child);
    child.once('close', (code) => {
      children.delete(child);
      if (code === 0 && !error.writableEnded) error.end();
      if (!data.writableEnded) data.end();
    });
  };
  const onStream = (s: SpdyStream) => {
    const type = s.headers.streamtype;
    const id = s.headers.requestid ?? s.headers.port ?? '';
    if ((type !== 'data' && type !== 'error') || !s.headers.port) {
      s.reset();
      return;
    }
    s.on('error', () => undefined);
    void s.reply().catch(() => undefined);
    let p = pairs.get(id);
    if (!p) {
      p = { timer: setTimeout(() => { pairs.delete(id); p!.data?.reset(); p!.error?.reset(); }, PAIR_TIMEOUT_MS) };
      pairs.set(id, p);
    }
    if (p[type]) {
      s.reset();
      return;
    }
    p[type] = s;
    if (type === 'error') s.resume(); // the client sends nothing on it
    if (p.data && p.error) start(id);
  };
  session.on('stream', onStream);
  return new Promise((resolve) => {
    session.once('close', () => {
      session.off('stream', onStream);
      for (const p of pairs.values()) clearTimeout(p.timer);
      for (const c of children) c.kill('SIGTERM');
      resolve();
    });
  });
}

/**
 * WebSocket port forwarding: one connection per requested port; port i uses channel 2i for data
 * and 2i+1 for errors, each opened by the server with the port number. Runs until the client hangs up.
 */
export function wsPortForward(ws: WebSocket, ports: number[], base64: boolean, connect: PodConnector, log: Logger): Promise<void> {
  const send = (ch: number, data: Buffer) => { if (ws.readyState === ws.OPEN) ws.send(encodeChannelMessage(ch, data, base64)); };
  const inputs = ports.map((port, i) => {
    send(2 * i, portPrefix(port));
    send(2 * i + 1, portPrefix(port));
    const input = new PassThrough();
    const output = new Writable({ write(chunk: Buffer, _e, cb) { send(2 * i, chunk); cb(); } });
    const child = forward(connect, port, input, output, (msg) => send(2 * i + 1, Buffer.from(msg)), log);
    return { input, child };
  });
  ws.on('message', (raw: Buffer, isBinary: boolean) => {
    const m = decodeChannelMessage(isBinary ? raw : raw.toString(), base64);
    if (!m || m.channel % 2 !== 0) return;
    inputs[m.channel / 2]?.input.write(m.data);
  });
  ws.on('error', () => undefined);
  return new Promise((resolve) => {
    ws.once('close', () => {
      for (const { input, child } of inputs) {
        input.end();
        child.kill('SIGTERM');
      }
      resolve();
    });
  });
}
