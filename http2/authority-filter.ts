// Lets clients built with older grpc-go talk to us over the unix socket. They send the socket path
// itself as the HTTP/2 :authority ("/run/minicri/minicri.sock"); nghttp2 under Node's http2 rejects an
// authority containing '/' and resets every stream. containerd and CRI-O accept it, so we must too.
//
// Each accepted connection is passed through filterAuthority() before grpc-js sees it. The filter reads
// the client-to-server bytes frame by frame up to the end of the first request's header block. If
// nghttp2 would take that request's authority as sent, the connection goes through untouched from then
// on. Otherwise (a refused :authority or host, or neither) every header block of the connection is
// decoded with an HPACK decoder that tracks the client's encoder and re-encoded by the filter's own
// encoder with :authority set to "localhost".
// Server-to-client bytes are never looked at.
import { Duplex } from 'node:stream';
import hpack from 'hpack.js';
import type { HpackCompressor, HpackDecodedField, HpackDecompressor } from 'hpack.js';
import { InvalidArgument } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/log.js';

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
const FRAME_HEADER_LEN = 9;
const TYPE_HEADERS = 0x1;
const TYPE_PUSH_PROMISE = 0x5;
const TYPE_CONTINUATION = 0x9;
const FLAG_END_STREAM = 0x1;
const FLAG_END_HEADERS = 0x4;
const FLAG_PADDED = 0x8;
const FLAG_PRIORITY = 0x20;
const PRIORITY_FIELDS_LEN = 5;
/** Every HTTP/2 peer accepts frames this large (the floor of SETTINGS_MAX_FRAME_SIZE), so re-encoded
 *  blocks are cut into frames of at most this size whatever the server advertised. */
const OUT_FRAME_MAX = 16_384;
/** The dynamic table size both HPACK ends start with (HTTP/2's initial SETTINGS_HEADER_TABLE_SIZE).
 *  The client's encoder starts here and announces any change with a size update. */
const INITIAL_TABLE_SIZE = 4_096;
/** Largest table size update the decoder follows. A conforming client stays within what the server
 *  advertised (grpc-js keeps Node's 4096); the headroom only makes the filter lenient, never wrong. */
const DECODER_TABLE_LIMIT = 65_536;
/** Bound on one header block, compressed and decoded, so a client cannot make us buffer or expand
 *  without limit. Far above gRPC's metadata limits. */
const MAX_HEADER_BLOCK = 256 * 1024;
/** Per-field overhead in the header list size (RFC 7541 §4.1). */
const FIELD_OVERHEAD = 32;
const REPLACEMENT_AUTHORITY = 'localhost';

/** A non-empty run of RFC 3986 authority characters: what nghttp2 accepts in :authority and host
 *  (checked against it for each excluded character class). Anything else is rewritten. */
const AUTHORITY_RE = /^[A-Za-z0-9\-._~!$&'()*+,;=:@[\]%]+$/;

export function isAcceptedAuthority(value: string): boolean {
  return AUTHORITY_RE.test(value);
}

/** Why nghttp2 would refuse this request's authority, or null when it takes it as sent. nghttp2
 *  checks `host` like :authority and resets a request that carries neither. */
export function authorityProblem(fields: readonly HpackDecodedField[]): string | null {
  let present = false;
  for (const f of fields) {
    if (f.name !== ':authority' && f.name !== 'host') continue;
    if (!isAcceptedAuthority(f.value)) return `${f.name} ${JSON.stringify(f.value)}`;
    present = true;
  }
  return present ? null : 'neither :authority nor host';
}

/** The header list with :authority set to localhost (added to requests that lack both it and host)
 *  and any refused host replaced by localhost. Blocks without :method (trailers) get nothing added. */
export function withLocalAuthority(fields: readonly HpackDecodedField[]): HpackDecodedField[] {
  const out: HpackDecodedField[] = [];
  let hasAuthority = false;
  let isRequest = false;
  let firstRegular = -1;
  for (const f of fields) {
    let value = f.value;
    if (f.name === ':authority') {
      value = REPLACEMENT_AUTHORITY;
      hasAuthority = true;
    } else if (f.name === 'host') {
      if (!isAcceptedAuthority(value)) value = REPLACEMENT_AUTHORITY;
      hasAuthority = true;
    } else if (f.name === ':method') {
      isRequest = true;
    }
    if (firstRegular < 0 && !f.name.startsWith(':')) firstRegular = out.length;
    out.push({ name: f.name, value, neverIndex: f.neverIndex });
  }
  if (isRequest && !hasAuthority) {
    // Pseudo-header fields must precede regular ones.
    out.splice(firstRegular < 0 ? out.length : firstRegular, 0, { name: ':authority', value: REPLACEMENT_AUTHORITY, neverIndex: false });
  }
  return out;
}

interface OpenBlock {
  streamId: number;
  endStream: boolean;
  /** The frames as received, forwarded as they are if the connection turns out not to need rewriting. */
  frames: Buffer[];
  /** The block's fragments with padding and priority fields removed. */
  fragments: Buffer[];
  size: number;
}

export type FilterMode = 'undecided' | 'pass' | 'rewrite';

/**
 * The synchronous core of the filter, free of streams: feed it client bytes in any chunking, forward
 * what it returns, in order. Throws InvalidArgument when the client breaks the protocol in a way that
 * matters here; the connection must then be closed.
 */
export class ClientFrameFilter {
  private modeNow: FilterMode = 'undecided';
  private prefaceSeen = false;
  /** Bytes held back until `need` bytes are available (a frame header or a whole header frame). */
  private held: Buffer[] = [];
  private heldLen = 0;
  private need = PREFACE.length;
  /** Payload bytes of a non-header frame still to forward as they come. */
  private forwardLeft = 0;
  private block: OpenBlock | null = null;
  private decoder: HpackDecompressor | null = createDecoder();
  private decodeError: Error | null = null;
  private encoder: HpackCompressor | null = null;

  constructor(private readonly onRewrite: (problem: string) => void = () => {}) {
    this.decoder?.on('error', (err) => { this.decodeError = err; });
  }

  get mode(): FilterMode {
    return this.modeNow;
  }

  /** Takes the next bytes from the client; returns the bytes to send the server, in order. */
  push(chunk: Buffer): Buffer[] {
    if (this.modeNow === 'pass') return [chunk];
    const out: Buffer[] = [];
    let buf = chunk;
    if (this.heldLen > 0) {
      this.held.push(chunk);
      this.heldLen += chunk.length;
      if (this.heldLen < this.need) return out;
      buf = Buffer.concat(this.held, this.heldLen);
      this.held = [];
      this.heldLen = 0;
    }
    let pos = 0;
    while (pos < buf.length) {
      // Deciding happens inside onHeaderFrame, hence the getter (not narrowed by the check above).
      if (this.mode === 'pass') {
        out.push(buf.subarray(pos));
        return out;
      }
      const avail = buf.length - pos;
      if (this.forwardLeft > 0) {
        const n = Math.min(this.forwardLeft, avail);
        out.push(buf.subarray(pos, pos + n));
        pos += n;
        this.forwardLeft -= n;
        continue;
      }
      if (!this.prefaceSeen) {
        if (avail < PREFACE.length) { this.need = PREFACE.length; break; }
        if (!buf.subarray(pos, pos + PREFACE.length).equals(PREFACE)) {
          throw new InvalidArgument('client did not open with the HTTP/2 connection preface: closing the connection');
        }
        out.push(buf.subarray(pos, pos + PREFACE.length));
        pos += PREFACE.length;
        this.prefaceSeen = true;
        continue;
      }
      if (avail < FRAME_HEADER_LEN) { this.need = FRAME_HEADER_LEN; break; }
      const length = buf.readUIntBE(pos, 3);
      const type = buf[pos + 3]!;
      const flags = buf[pos + 4]!;
      const streamId = buf.readUInt32BE(pos + 5) & 0x7fff_ffff;
      if (type === TYPE_HEADERS || type === TYPE_CONTINUATION) {
        if (length > MAX_HEADER_BLOCK) {
          throw new InvalidArgument(
            `HTTP/2 header frame of ${length} bytes on stream ${streamId} exceeds ${MAX_HEADER_BLOCK}: closing the connection`,
          );
        }
        const frameLen = FRAME_HEADER_LEN + length;
        if (avail < frameLen) { this.need = frameLen; break; }
        this.onHeaderFrame(buf.subarray(pos, pos + frameLen), type, flags, streamId, out);
        pos += frameLen;
        continue;
      }
      if (this.block) {
        throw new InvalidArgument(
          `HTTP/2 frame of type ${type} inside the header block of stream ${this.block.streamId}, ` +
            'where only CONTINUATION may come: closing the connection',
        );
      }
      if (type === TYPE_PUSH_PROMISE) {
        throw new InvalidArgument('HTTP/2 client sent PUSH_PROMISE, which only servers may send: closing the connection');
      }
      out.push(buf.subarray(pos, pos + FRAME_HEADER_LEN));
      pos += FRAME_HEADER_LEN;
      this.forwardLeft = length;
    }
    if (pos < buf.length) {
      this.held.push(buf.subarray(pos));
      this.heldLen = buf.length - pos;
    }
    return out;
  }

  private onHeaderFrame(frame: Buffer, type: number, flags: number, streamId: number, out: Buffer[]): void {
    const payload = frame.subarray(FRAME_HEADER_LEN);
    if (type === TYPE_HEADERS) {
      if (this.block) {
        throw new InvalidArgument(
          `HTTP/2 HEADERS for stream ${streamId} while the header block of stream ${this.block.streamId} is still open: ` +
            'closing the connection',
        );
      }
      if (streamId === 0) throw new InvalidArgument('HTTP/2 HEADERS on stream 0: closing the connection');
      let start = 0;
      let end = payload.length;
      if (flags & FLAG_PADDED) {
        if (end < 1) {
          throw new InvalidArgument(`HTTP/2 padded HEADERS frame on stream ${streamId} has no pad length: closing the connection`);
        }
        start = 1;
        end -= payload[0]!;
      }
      if (flags & FLAG_PRIORITY) start += PRIORITY_FIELDS_LEN;
      if (start > end) {
        throw new InvalidArgument(
          `HTTP/2 HEADERS frame on stream ${streamId} is shorter than its padding and priority fields: closing the connection`,
        );
      }
      this.block = {
        streamId,
        endStream: (flags & FLAG_END_STREAM) !== 0,
        frames: [frame],
        fragments: [payload.subarray(start, end)],
        size: end - start,
      };
    } else {
      if (!this.block || this.block.streamId !== streamId) {
        throw new InvalidArgument(
          `HTTP/2 CONTINUATION for stream ${streamId} without an open header block on that stream: closing the connection`,
        );
      }
      this.block.frames.push(frame);
      this.block.fragments.push(payload);
      this.block.size += payload.length;
      if (this.block.size > MAX_HEADER_BLOCK) {
        throw new InvalidArgument(`HTTP/2 header block on stream ${streamId} exceeds ${MAX_HEADER_BLOCK} bytes: closing the connection`);
      }
    }
    if (flags & FLAG_END_HEADERS) {
      const block = this.block!;
      this.block = null;
      this.finishBlock(block, out);
    }
  }

  private finishBlock(block: OpenBlock, out: Buffer[]): void {
    const bytes = block.fragments.length === 1 ? block.fragments[0]! : Buffer.concat(block.fragments, block.size);
    const fields = this.decode(bytes, block.streamId);
    if (this.modeNow === 'undecided') {
      const problem = authorityProblem(fields);
      if (problem === null) {
        // Decided once, on the first request: from here on the bytes are not even parsed.
        out.push(...block.frames);
        this.modeNow = 'pass';
        this.decoder = null;
        return;
      }
      this.modeNow = 'rewrite';
      // Our encoder never adds to the dynamic table, so it is valid whatever SETTINGS_HEADER_TABLE_SIZE
      // the server advertises and never needs a size update; on a unix socket the bytes saved by
      // indexing or Huffman coding are not worth the CPU.
      this.encoder = hpack.compressor.create({ table: { maxSize: 0 } });
      this.onRewrite(problem);
    }
    out.push(this.encode(block.streamId, block.endStream, fields));
  }

  private decode(blockBytes: Buffer, streamId: number): HpackDecodedField[] {
    const decoder = this.decoder!;
    if (blockBytes.length > 0) {
      decoder.write(blockBytes);
      decoder.execute();
    }
    if (this.decodeError) {
      throw new InvalidArgument(
        `HTTP/2 header block on stream ${streamId} is not valid HPACK (${this.decodeError.message}): closing the connection`,
        { cause: this.decodeError },
      );
    }
    const fields: HpackDecodedField[] = [];
    let listSize = 0;
    for (let field = decoder.read(); field !== null; field = decoder.read()) {
      fields.push(field);
      listSize += field.name.length + field.value.length + FIELD_OVERHEAD;
    }
    if (listSize > MAX_HEADER_BLOCK) {
      throw new InvalidArgument(
        `HTTP/2 header list on stream ${streamId} decodes to ${listSize} bytes, over ${MAX_HEADER_BLOCK}: closing the connection`,
      );
    }
    return fields;
  }

  private encode(streamId: number, endStream: boolean, fields: HpackDecodedField[]): Buffer {
    const encoder = this.encoder!;
    encoder.write(withLocalAuthority(fields).map((f) => ({ ...f, huffman: false, incremental: false })));
    return frameHeaderBlock(streamId, endStream, encoder.read() ?? Buffer.alloc(0));
  }
}

function createDecoder(): HpackDecompressor {
  const decoder = hpack.decompressor.create({ table: { maxSize: DECODER_TABLE_LIMIT } });
  decoder.updateTableSize(INITIAL_TABLE_SIZE);
  return decoder;
}

/** One HEADERS frame plus CONTINUATION frames as needed, without padding or priority. */
export function frameHeaderBlock(streamId: number, endStream: boolean, block: Buffer): Buffer {
  const count = Math.max(1, Math.ceil(block.length / OUT_FRAME_MAX));
  const out = Buffer.allocUnsafe(block.length + count * FRAME_HEADER_LEN);
  let src = 0;
  let dst = 0;
  for (let i = 0; i < count; i++) {
    const len = Math.min(OUT_FRAME_MAX, block.length - src);
    out.writeUIntBE(len, dst, 3);
    out[dst + 3] = i === 0 ? TYPE_HEADERS : TYPE_CONTINUATION;
    out[dst + 4] = (i === 0 && endStream ? FLAG_END_STREAM : 0) | (i === count - 1 ? FLAG_END_HEADERS : 0);
    out.writeUInt32BE(streamId, dst + 5);
    block.copy(out, dst + FRAME_HEADER_LEN, src, src + len);
    src += len;
    dst += FRAME_HEADER_LEN + len;
  }
  return out;
}

export interface FilterAuthorityOptions {
  log?: Logger;
}

/**
 * Wraps an accepted client connection; give the result to grpc-js's injectConnection(). Bytes from
 * the client go through ClientFrameFilter; writes to the result go to the client untouched. Backpressure
 * flows both ways, closing either side closes the other, and a client breaking the protocol gets its
 * connection closed (and only that one).
 */
export function filterAuthority(client: Duplex, options: FilterAuthorityOptions = {}): Duplex {
  const log = options.log ?? silentLogger;
  const filter = new ClientFrameFilter((problem) => {
    log.debug({ problem }, 'first request has an authority nghttp2 refuses: rewriting it to localhost on this connection');
  });
  let pendingWrite: (() => void) | null = null;

  const toServer = new Duplex({
    read() {
      client.resume();
    },
    writev(chunks, callback) {
      client.cork();
      let flushed = true;
      for (const { chunk } of chunks) flushed = client.write(chunk);
      client.uncork();
      if (flushed) callback();
      else pendingWrite = () => callback();
    },
    final(callback) {
      client.end();
      callback();
    },
    destroy(err, callback) {
      // After a clean end, let the client flush what was written before it is closed.
      if (!err && client.writableEnded && !client.writableFinished) client.once('finish', () => client.destroy());
      else client.destroy();
      callback(err);
    },
  });

  client.on('data', (chunk: Buffer) => {
    let out: Buffer[];
    try {
      out = filter.push(chunk);
    } catch (err) {
      log.warn({ err }, 'closing a CRI client connection that broke HTTP/2');
      toServer.destroy();
      return;
    }
    if (out.length === 0) return;
    // One push per chunk: the session then parses it in one go, as it would the socket's own read.
    if (!toServer.push(out.length === 1 ? out[0] : Buffer.concat(out))) client.pause();
  });
  client.on('drain', () => {
    const resume = pendingWrite;
    pendingWrite = null;
    resume?.();
  });
  client.on('end', () => toServer.push(null));
  client.on('error', (err) => log.debug({ err }, 'CRI client connection failed'));
  client.on('close', () => toServer.destroy());
  return toServer;
}
