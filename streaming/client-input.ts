// Back-pressure from a stream's reader (a process's stdin, a forwarded connection) to the client's
// connection. What the client sends for a stream waits in a queue until the reader asks for it; the
// bytes waiting across a session's streams are charged to one budget, and while it is exceeded the
// client's connection is paused (no more is read from its socket), as Go's spdystream blocks its frame
// loop on a stream that is full. Each stream thus holds at most the budget plus one frame or message.
import { Readable } from 'node:stream';

/**
 * What a queued chunk costs beyond its bytes (the Buffer object and its slot): charged so a flood of
 * tiny frames cannot hold millions of objects within a budget counted in bytes.
 */
export const CHUNK_OVERHEAD = 256;

/**
 * How often a paused connection is probed. Not reading its socket, we would not see the client hang up
 * (its FIN waits unread): a small write every so often makes a gone client's kernel answer with a
 * reset, and the write after it fails, which ends the session.
 */
export const PAUSED_PROBE_MS = 2000;

/**
 * Bytes a session holds for its readers; pauses the connection while more than `limit`, probing it
 * (`probe`: a ping) meanwhile.
 */
export class InputBudget {
  private used = 0;
  private probes: NodeJS.Timeout | undefined;

  constructor(
    readonly limit: number,
    private readonly pause: () => void,
    private readonly resume: () => void,
    private readonly probe: () => void,
  ) {}

  get bytes(): number {
    return this.used;
  }

  charge(n: number): void {
    this.used += n;
    if (!this.probes && this.used > this.limit) {
      this.probes = setInterval(this.probe, PAUSED_PROBE_MS).unref();
      this.pause();
    }
  }

  /** The connection is gone: no more probes. */
  close(): void {
    clearInterval(this.probes);
  }

  refund(n: number): void {
    this.used -= n;
    if (this.probes && this.used <= this.limit) {
      clearInterval(this.probes);
      this.probes = undefined;
      this.resume();
    }
  }
}

/**
 * The readable half of a client stream. A chunk goes straight to the stream while the stream's own
 * buffer is empty (a reader keeping up costs nothing); otherwise chunks queue here, charged to the
 * budget, and go joined into one when the stream's buffer is empty again. So the stream's buffer holds
 * one chunk at most, never a swarm of tiny ones. `push` and `buffered` (`readableLength`) are the
 * stream's; `want` is its `_read`.
 */
export class InputQueue {
  private chunks: Buffer[] = [];
  private charged = 0;
  private ending = false;
  private ended = false;

  constructor(
    private readonly budget: InputBudget,
    private readonly push: (chunk: Buffer | null) => boolean,
    private readonly buffered: () => number,
  ) {}

  /** The client sent `data`. */
  add(data: Buffer): void {
    if (this.ending || data.length === 0) return;
    this.chunks.push(data);
    const cost = data.length + CHUNK_OVERHEAD;
    this.charged += cost;
    this.budget.charge(cost);
    this.flush(false);
  }

  /** The client will send no more (its end follows what is queued). */
  end(): void {
    this.ending = true;
    this.flush(false);
  }

  /** The stream's `_read`. */
  want(): void {
    this.flush(true);
  }

  /** The stream is gone: what is queued is dropped and its charge returned. */
  drop(): void {
    this.chunks = [];
    this.refund();
    this.ending = true;
    this.ended = true;
  }

  private flush(fromRead: boolean): void {
    if (this.ended) return;
    if (this.chunks.length && this.buffered() === 0) {
      const chunk = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
      this.chunks = [];
      this.refund();
      this.push(chunk);
    } else if (fromRead && this.buffered() > 0) {
      // A read while the stream still holds data: answered with nothing, so the stream asks again
      // once its reader has taken that (a read left pending would never be asked again).
      this.push(EMPTY);
    }
    if (this.ending && this.chunks.length === 0) {
      this.ended = true;
      this.push(null);
    }
  }

  private refund(): void {
    const c = this.charged;
    this.charged = 0;
    if (c) this.budget.refund(c);
  }
}

const EMPTY = Buffer.alloc(0);

/** A readable fed by `add`/`end` with the queue's back-pressure (WebSocket stdin and port-forward input). */
export class ClientInput extends Readable {
  private readonly queue: InputQueue;

  constructor(budget: InputBudget) {
    super();
    this.queue = new InputQueue(budget, (chunk) => this.push(chunk), () => this.readableLength);
  }

  add(data: Buffer): void {
    this.queue.add(data);
  }

  /** The client closed this input. */
  finish(): void {
    this.queue.end();
  }

  override _read(): void {
    this.queue.want();
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.queue.drop();
    cb(err);
  }
}
