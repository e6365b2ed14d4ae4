// Port forwarding over either transport. Each forwarded connection is one pod-side TCP connection
// (opened by `connect`, a helper process each); a connection that fails reports on its error stream or
// channel and leaves the session's other connections alone. A session has at most
// maxPortForwardPairs connections open at once; both directions keep back-pressure (the client's input
// through client-input.ts, the pod's output through the stream's or channel's write callbacks).
import type { WebSocket } from 'ws';
import type { Logger } from '../core/log.js';
import type { Subprocess } from '../core/spawn.js';
import { ClientInput } from './client-input.js';
import { closeReason, limitMessage, protocolFailureMessage, type StreamingLimits } from './limits.js';
import { decodeChannelMessage, encodeChannelMessage, portPrefix } from './protocol.js';
import { RST_REFUSED_STREAM } from './spdy-frames.js';
import type { SpdySession, SpdyStream } from './spdy.js';
import { channelWriter, wsInputBudget } from './ws-channels.js';

/** Opens a connection to localhost:<port> in the pod: a process reading stdin and writing stdout. */
export type PodConnector = (port: number) => Subprocess;

/** How long the client has to open the second stream of a data/error pair. */
const PAIR_TIMEOUT_MS = 30_000;

function describeFailure(port: number, stderr: Buffer[], code: number | null): string {
  const why = Buffer.concat(stderr).toString().trim() || `exit status ${code}`;
  return `error forwarding port ${port} to the pod: ${why}`;
}

/**
 * Copies between one pod connection and a client's byte streams; calls `failed` with a message if it could not
 * connect, and returns no process when it could not even start one.
 */
function forward(
  connect: PodConnector, port: number, input: NodeJS.ReadableStream, output: NodeJS.WritableStream,
  failed: (msg: string) => void, log: Logger,
): Subprocess | undefined {
  let child: Subprocess;
  try {
    child = connect(port);
  } catch (err) {
    input.resume();
    failed(`error forwarding port ${port}: ${(err as Error).message}`);
    return undefined;
  }
  const stderr: Buffer[] = [];
  child.stderr!.on('data', (b: Buffer) => stderr.push(b));
  child.stdin!.on('error', () => undefined);
  input.pipe(child.stdin!);
  child.stdout!.pipe(output as NodeJS.WritableStream, { end: false });
  child.once('close', (code) => {
    input.unpipe(child.stdin!);
    // What the client still sends for this connection is dropped, not held against the session's budget.
    input.resume();
    if (code !== 0) {
      log.debug({ port, code }, 'port-forward connection failed');
      failed(describeFailure(port, stderr, code));
    }
  });
  return child;
}

/**
 * SPDY port forwarding: the client opens an error and a data stream per connection, tied by their
 * requestid header and naming the port. Runs until the client hangs up. A pair past the limit is
 * refused: its error stream carries the reason, its data stream is reset.
 */
export function spdyPortForward(session: SpdySession, connect: PodConnector, limits: StreamingLimits, log: Logger): Promise<void> {
  const pairs = new Map<string, { error?: SpdyStream; data?: SpdyStream; timer: NodeJS.Timeout }>();
  const children = new Set<Subprocess>();
  // Pairs being opened count as well as connections running: each pair may become a helper process.
  const open = () => pairs.size + children.size;
  const errorStreams = new Set<SpdyStream>();
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
    if (!child) {
      data.end();
      return;
    }
    children.add(child);
    errorStreams.add(error);
    child.once('close', (code) => {
      children.delete(child);
      errorStreams.delete(error);
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
    let p = pairs.get(id);
    if (!p && open() >= limits.maxPortForwardPairs) {
      refusals++;
      // The first refusal and every thousandth: a client opening pairs without end does not flood the log.
      if (refusals === 1 || refusals % 1000 === 0) {
        log.info({ open: open(), refusals }, 'port-forward pair refused: the session is at its limit');
      }
      if (type === 'data') {
        s.reset(RST_REFUSED_STREAM);
        return;
      }
      void s.reply().catch(() => undefined);
      s.resume();
      const what = `port-forward to port ${s.headers.port} refused: this session has ${open()} connections open`;
      s.end(limitMessage(limits, 'maxPortForwardPairs', what));
      return;
    }
    void s.reply().catch(() => undefined);
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
  let refusals = 0;
  session.on('stream', onStream);
  // A session closed for breaking a limit says why on every error stream still open.
  session.once('failure', (err) => {
    const message = protocolFailureMessage(err, limits);
    for (const s of errorStreams) if (!s.writableEnded) s.end(message);
  });
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
 * More ports than the pair limit close the WebSocket (1008) with the reason.
 */
export function wsPortForward(
  ws: WebSocket, ports: number[], base64: boolean, connect: PodConnector, limits: StreamingLimits, log: Logger,
): Promise<void> {
  const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()));
  ws.on('error', () => undefined);
  if (ports.length > limits.maxPortForwardPairs) {
    const why = limitMessage(limits, 'maxPortForwardPairs', `${ports.length} ports asked for`);
    log.info({ ports: ports.length }, `port-forward refused: ${why}`);
    ws.close(1008, closeReason(why));
    return closed;
  }
  const send = (ch: number, data: Buffer) => { if (ws.readyState === ws.OPEN) ws.send(encodeChannelMessage(ch, data, base64)); };
  const budget = wsInputBudget(ws, limits.inputBufferBytes);
  const inputs = ports.map((port, i) => {
    send(2 * i, portPrefix(port));
    send(2 * i + 1, portPrefix(port));
    const input = new ClientInput(budget);
    const child = forward(connect, port, input, channelWriter(ws, 2 * i, base64), (msg) => send(2 * i + 1, Buffer.from(msg)), log);
    return { input, child };
  });
  ws.on('message', (raw: Buffer, isBinary: boolean) => {
    const m = decodeChannelMessage(isBinary ? raw : raw.toString(), base64);
    if (!m || m.channel % 2 !== 0) return;
    inputs[m.channel / 2]?.input.add(m.data);
  });
  return closed.then(() => {
    for (const { input, child } of inputs) {
      input.destroy();
      child?.kill('SIGTERM');
    }
  });
}
