// A SPDY/3.1 session over an upgraded HTTP connection, as Kubernetes streaming uses it: the client
// opens one stream per channel (SYN_STREAM with a streamType header), the server answers each with
// SYN_REPLY and then both sides send DATA, half-closing with FIN.
//
// Our own codec rather than spdy-transport: that package is written for HTTP-over-SPDY and refuses
// SYN_STREAMs without :method/:path, which Kubernetes streams never carry; patching its parser would
// tie us to its internals. What Kubernetes needs of SPDY is small (see spdy-frames.ts).
import { EventEmitter, once } from 'node:events';
import { Duplex } from 'node:stream';
import * as zlib from 'node:zlib';
import { CHUNK_OVERHEAD, InputBudget, InputQueue } from './client-input.js';
import { DEFAULT_LIMITS } from './limits.js';
import {
  decodeHeaderBlock, encodeData, encodeGoAway, encodeHeaderBlock, encodePing, encodeRstStream, encodeSynReply, encodeSynStream,
  FLAG_FIN, FrameReader, GOAWAY_PROTOCOL_ERROR, HEADER_DICTIONARY, HeaderBlockTooLarge, RST_CANCEL, RST_PROTOCOL_ERROR,
  RST_REFUSED_STREAM, SpdyProtocolError, type Frame, type SpdyHeaders,
} from './spdy-frames.js';
import { Mutex } from '../core/locks.js';

/** DATA frames we send carry at most this much, so one stream cannot hog the connection. */
const DATA_CHUNK = 32 * 1024;
/** How long a closing session waits for the peer to take what is queued for it. */
const CLOSE_GRACE_MS = 5000;

/**
 * Decompressed header bytes accepted per header block. Kubernetes clients send a few hundred bytes of
 * headers per stream (streamType, port, requestID); 64 KiB leaves ample room while one frame of ~2 KB
 * can no longer expand into megabytes held by the daemon.
 */
export const MAX_HEADER_BLOCK_BYTES = 64 * 1024;

/** One zlib context per direction, shared by every header block of the connection (SPDY's rule). */
class HeaderCodec {
  private readonly z: zlib.Inflate | zlib.Deflate;
  private readonly queue = new Mutex();
  /** Set once the context is unusable (a block over the cap, a zlib error): every later block fails with it. */
  private broken: Error | undefined;

  constructor(kind: 'inflate' | 'deflate', private readonly maxOutput = Infinity) {
    const opts = { dictionary: HEADER_DICTIONARY };
    this.z = kind === 'inflate' ? zlib.createInflate(opts) : zlib.createDeflate(opts);
    this.z.on('error', (err) => { this.broken ??= err; });
  }

  /**
   * Feeds one header block through the shared context and returns what it produced. The output is taken
   * as zlib makes it (never left to fill zlib's buffer, which would stall the flush forever) and counted:
   * past `maxOutput` the block fails with HeaderBlockTooLarge.
   */
  run(input: Buffer): Promise<Buffer> {
    return this.queue.lock(() => new Promise<Buffer>((resolve, reject) => {
      if (this.broken) return reject(this.broken);
      const out: Buffer[] = [];
      let size = 0;
      const finish = (err?: Error) => {
        this.z.off('data', onData);
        this.z.off('error', finish);
        this.z.off('close', onClose);
        if (err) reject(err);
        else resolve(Buffer.concat(out));
      };
      const onData = (b: Buffer) => {
        size += b.length;
        if (size <= this.maxOutput) {
          out.push(b);
          return;
        }
        this.broken = new HeaderBlockTooLarge(this.maxOutput);
        finish(this.broken);
        this.z.destroy();
      };
      // The session closing destroys the context: the block in progress fails rather than waits forever.
      const onClose = () => finish(this.broken);
      this.z.on('data', onData);
      this.z.once('error', finish);
      this.z.once('close', onClose);
      this.z.write(input);
      this.z.flush(zlib.constants.Z_SYNC_FLUSH, () => {
        // Output zlib pushed but not yet emitted is emitted (and counted) by read().
        while (!this.broken && this.z.read() !== null);
        finish(this.broken);
      });
    }));
  }

  close(): void {
    this.broken ??= new Error('the SPDY connection is closed');
    this.z.destroy();
  }
}

export class SpdyStream extends Duplex {
  private replied = false;
  private remoteClosed = false;
  private readonly input: InputQueue;
  /** Resolves once the peer answered our SYN_STREAM (client side). */
  readonly replyReceived: Promise<void>;
  private onReply!: () => void;

  constructor(private readonly session: SpdySession, readonly id: number, readonly headers: SpdyHeaders) {
    super({ allowHalfOpen: true });
    this.replyReceived = new Promise((resolve) => { this.onReply = resolve; });
    this.input = new InputQueue(session.inputBudget, (chunk) => this.push(chunk), () => this.readableLength);
  }

  /** Accepts a stream the peer opened. */
  reply(headers: SpdyHeaders = {}): Promise<void> {
    if (this.replied) return Promise.resolve();
    this.replied = true;
    return this.session.sendReply(this.id, headers);
  }

  /** Aborts the stream (RST_STREAM CANCEL, or the status given). */
  reset(status = RST_CANCEL): void {
    this.session.sendRst(this.id, status);
    this.destroy();
  }

  override _read(): void {
    this.input.want();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.session.sendData(this.id, chunk, false).then(() => cb(), cb);
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.session.sendData(this.id, Buffer.alloc(0), true).then(() => cb(), cb);
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.input.drop();
    this.session.forget(this.id);
    cb(err);
  }

  /** @internal frames from the session */
  receiveData(data: Buffer, fin: boolean): void {
    if (this.remoteClosed) return;
    this.input.add(data);
    if (fin) {
      this.remoteClosed = true;
      this.input.end();
    }
  }

  /** @internal */
  receiveReply(): void {
    this.onReply();
  }
}

export interface SpdySessionEvents {
  stream: [SpdyStream];
  /** The peer broke the protocol or a limit (a frame too large): the session is closing. */
  failure: [SpdyProtocolError];
  close: [];
}

export interface SpdySessionOptions {
  /** Picks the stream id parity (odd for the client). */
  client: boolean;
  /** The largest frame payload accepted; a larger frame closes the session ('failure'). */
  maxFramePayload?: number;
  /** Bytes from the peer held for readers that are behind before the socket is paused (client-input.ts). */
  inputBufferBytes?: number;
}

/**
 * One SPDY connection. Events: 'stream' (the peer opened a stream; call reply() to accept it; with no
 * listener it is refused), 'failure' and 'close'.
 */
export class SpdySession extends EventEmitter<SpdySessionEvents> {
  /** @internal what the peer sent and no reader took yet, across the streams */
  readonly inputBudget: InputBudget;
  private readonly streams = new Map<number, SpdyStream>();
  private readonly inflate = new HeaderCodec('inflate', MAX_HEADER_BLOCK_BYTES);
  private readonly deflate = new HeaderCodec('deflate');
  private readonly reader: FrameReader;
  /** Frames are handled one at a time, in order, since header blocks decompress asynchronously. */
  private readonly incoming = new Mutex();
  /** Frames go out in the order they were asked for; header compression must not reorder them. */
  private readonly outgoing = new Mutex();
  private nextId: number;
  private lastPeerId = 0;
  private closed = false;
  /** A protocol error was seen: nothing more is read. */
  private failed = false;
  /** The protocol error reported ('failure'), once. */
  private failure: SpdyProtocolError | undefined;
  private probing = false;
  private hungUp = false;
  /** Our pings have our streams' parity. */
  private pingId: number;

  constructor(private readonly socket: Duplex, opts: SpdySessionOptions) {
    super();
    this.nextId = opts.client ? 1 : 2;
    this.pingId = this.nextId;
    this.reader = new FrameReader(opts.maxFramePayload ?? DEFAULT_LIMITS.maxFrameBytes);
    this.inputBudget = new InputBudget(opts.inputBufferBytes ?? DEFAULT_LIMITS.inputBufferBytes, () => socket.pause(), () => {
      if (!this.closed) socket.resume();
    }, () => this.probe());
    socket.on('data', (b: Buffer) => this.onBytes(b));
    socket.on('close', () => this.hangUp());
    socket.on('end', () => this.hangUp());
    socket.on('error', () => this.shutdown());
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Opens a stream and waits for the peer's SYN_REPLY. */
  async openStream(headers: SpdyHeaders, timeoutMs = 30_000): Promise<SpdyStream> {
    const id = this.nextId;
    this.nextId += 2;
    const stream = new SpdyStream(this, id, headers);
    this.streams.set(id, stream);
    await this.enqueueCompressed(headers, (h) => encodeSynStream(id, h));
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        stream.replyReceived,
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no SYN_REPLY for stream ${id} within ${timeoutMs} ms`)), timeoutMs);
        }),
        once(stream, 'close').then(() => { throw new Error(`stream ${id} was closed before the peer accepted it`); }),
      ]);
    } finally {
      clearTimeout(timer);
    }
    return stream;
  }

  /**
   * Says goodbye (GOAWAY with `status`) and closes the connection; every stream ends. A peer that does
   * not take what is still queued for it within CLOSE_GRACE_MS is cut off.
   */
  async close(status = 0): Promise<void> {
    if (this.closed) return;
    let timer: NodeJS.Timeout | undefined;
    const sent = await Promise.race([
      this.enqueue(() => encodeGoAway(this.lastPeerId, status), CHUNK_OVERHEAD).then(() => true, () => false),
      new Promise<boolean>((resolve) => { timer = setTimeout(() => resolve(false), CLOSE_GRACE_MS); }),
    ]);
    clearTimeout(timer);
    if (sent) this.socket.end();
    else this.socket.destroy();
    this.shutdown();
  }

  /** Closes the connection at once. */
  destroy(): void {
    this.socket.destroy();
    this.shutdown();
  }

  /** @internal */
  sendReply(id: number, headers: SpdyHeaders): Promise<void> {
    return this.enqueueCompressed(headers, (h) => encodeSynReply(id, h));
  }

  /** @internal */
  async sendData(id: number, data: Buffer, fin: boolean): Promise<void> {
    if (this.closed) throw new Error('the SPDY connection is closed');
    for (let off = 0; off < data.length || (off === 0 && fin); off += DATA_CHUNK) {
      const piece = data.subarray(off, off + DATA_CHUNK);
      const last = off + DATA_CHUNK >= data.length;
      await this.enqueue(() => encodeData(id, piece, fin && last));
      if (data.length === 0) break;
    }
  }

  /** @internal */
  sendRst(id: number, status: number): void {
    if (!this.closed) void this.enqueue(() => encodeRstStream(id, status), CHUNK_OVERHEAD).catch(() => undefined);
  }

  /**
   * The peer has gone. Frames it sent before are still handled (header blocks inflate asynchronously, and
   * its last SYN_REPLY may be among them), but for CLOSE_GRACE_MS at most: a handler that never finishes
   * must not keep the session, and with it a session slot of the server, alive.
   */
  private hangUp(): void {
    if (this.hungUp || this.closed) return;
    this.hungUp = true;
    const timer = setTimeout(() => this.shutdown(), CLOSE_GRACE_MS);
    this.once('close', () => clearTimeout(timer));
    void this.incoming.lock(() => this.shutdown());
  }

  /** A ping of our own, one at a time (a peer not reading gets no pile of them). */
  private probe(): void {
    if (this.probing || this.closed) return;
    this.probing = true;
    this.pingId += 2;
    void this.enqueue(() => encodePing(this.pingId)).catch(() => this.destroy()).finally(() => { this.probing = false; });
  }

  /** @internal */
  forget(id: number): void {
    this.streams.delete(id);
  }

  /**
   * Queues a frame. `cost` charges it to the input budget until written: the frames a peer provokes
   * (replies, resets, pongs) then stop us reading it while it does not read them, rather than pile up.
   */
  private enqueue(frame: () => Buffer, cost = 0): Promise<void> {
    return this.queueOut(async () => this.write(frame()), cost);
  }

  private enqueueCompressed(headers: SpdyHeaders, frame: (compressed: Buffer) => Buffer): Promise<void> {
    // Compress in queue order: the deflate context is shared, so blocks must reach the wire in the
    // order they were compressed.
    return this.queueOut(async () => this.write(frame(await this.deflate.run(encodeHeaderBlock(headers)))), CHUNK_OVERHEAD);
  }

  private queueOut(send: () => Promise<void>, cost: number): Promise<void> {
    if (cost) this.inputBudget.charge(cost);
    return this.outgoing.lock(send).finally(() => { if (cost) this.inputBudget.refund(cost); });
  }

  private write(buf: Buffer): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the SPDY connection is closed'));
    return new Promise((resolve, reject) => {
      // Resolving on the write callback gives back-pressure: a slow client slows the stream feeding it.
      this.socket.write(buf, (err) => (err ? reject(err) : resolve()));
    });
  }

  private onBytes(b: Buffer): void {
    if (this.failed) return;
    const { frames, error } = this.reader.push(b);
    for (const f of frames) {
      // Frames waiting for their turn (behind a header block being inflated) count as held input too.
      const cost = frameCost(f);
      this.inputBudget.charge(cost);
      void this.incoming.lock(() => this.handle(f).catch((err: unknown) => {
        if (err instanceof SpdyProtocolError) this.fail(err);
        else this.destroy();
      }).finally(() => this.inputBudget.refund(cost)));
    }
    if (error) {
      this.stopReading();
      // After the frames before it.
      void this.incoming.lock(() => this.fail(error));
    }
  }

  private stopReading(): void {
    this.failed = true;
    this.socket.pause();
  }

  /** The peer broke the protocol or a limit: listeners may still write (an error stream), then GOAWAY goes out. */
  private fail(error: SpdyProtocolError): void {
    this.stopReading();
    if (this.closed || this.failure) return;
    this.failure = error;
    this.emit('failure', error);
    void this.close(GOAWAY_PROTOCOL_ERROR);
  }

  private async handle(f: Frame): Promise<void> {
    if (this.closed) return;
    switch (f.type) {
      case 'data':
        this.streams.get(f.streamId)?.receiveData(f.data, (f.flags & FLAG_FIN) !== 0);
        return;
      case 'syn_stream': {
        const headers = decodeHeaderBlock(await this.inflate.run(f.headerBlock));
        if (this.streams.has(f.streamId) || f.streamId <= this.lastPeerId) {
          this.sendRst(f.streamId, RST_PROTOCOL_ERROR);
          return;
        }
        this.lastPeerId = f.streamId;
        const stream = new SpdyStream(this, f.streamId, headers);
        this.streams.set(f.streamId, stream);
        // Nobody takes streams (an exec session has all it asked for): refused, not kept.
        if (!this.emit('stream', stream)) {
          stream.reset(RST_REFUSED_STREAM);
          return;
        }
        if (f.flags & FLAG_FIN) stream.receiveData(Buffer.alloc(0), true);
        return;
      }
      case 'syn_reply': {
        await this.inflate.run(f.headerBlock);
        const stream = this.streams.get(f.streamId);
        stream?.receiveReply();
        if (f.flags & FLAG_FIN) stream?.receiveData(Buffer.alloc(0), true);
        return;
      }
      case 'headers':
        // Keeps the shared inflate context in step; Kubernetes sends no headers we act on.
        await this.inflate.run(f.headerBlock);
        if (f.flags & FLAG_FIN) this.streams.get(f.streamId)?.receiveData(Buffer.alloc(0), true);
        return;
      case 'rst_stream':
        this.streams.get(f.streamId)?.destroy();
        return;
      case 'ping':
        // Only answer the peer's pings (their parity differs from our ids); ours coming back need nothing.
        if ((f.id % 2) !== (this.nextId % 2)) await this.enqueue(() => encodePing(f.id), CHUNK_OVERHEAD);
        return;
      case 'goaway':
        this.destroy();
        return;
      default:
        return;
    }
  }

  private shutdown(): void {
    if (this.closed) return;
    this.closed = true;
    for (const s of this.streams.values()) s.destroy();
    this.streams.clear();
    this.inflate.close();
    this.deflate.close();
    this.inputBudget.close();
    this.emit('close');
  }
}

/** What a parsed frame holds of memory until handled: its payload and the objects around it. */
function frameCost(f: Frame): number {
  if (f.type === 'data') return f.data.length + CHUNK_OVERHEAD;
  if ('headerBlock' in f) return f.headerBlock.length + CHUNK_OVERHEAD;
  return CHUNK_OVERHEAD;
}
