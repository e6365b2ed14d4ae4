// SPDY/3.1 framing, pure: frame encoding and decoding and the uncompressed header block. The zlib
// header compression that wraps header blocks lives in spdy.ts, because it keeps state per connection.
//
// Only what Kubernetes streaming uses is modelled: SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING,
// GOAWAY, HEADERS, WINDOW_UPDATE and DATA. Go's spdystream (kubectl, crictl) does no flow control,
// so neither do we: WINDOW_UPDATE and SETTINGS are parsed and ignored.

export const SPDY_VERSION = 3;
export const FLAG_FIN = 0x01;
/** A frame's length field has 24 bits. */
export const MAX_FRAME_PAYLOAD = 0xffffff;

export const enum FrameType {
  SynStream = 1,
  SynReply = 2,
  RstStream = 3,
  Settings = 4,
  Ping = 6,
  GoAway = 7,
  Headers = 8,
  WindowUpdate = 9,
}

/** RST_STREAM status codes we send. */
export const RST_PROTOCOL_ERROR = 1;
export const RST_REFUSED_STREAM = 3;
export const RST_CANCEL = 5;
/** GOAWAY status: the peer broke the protocol. */
export const GOAWAY_PROTOCOL_ERROR = 1;

export type Frame =
  | { type: 'data'; streamId: number; flags: number; data: Buffer }
  | { type: 'syn_stream'; streamId: number; associatedId: number; priority: number; flags: number; headerBlock: Buffer }
  | { type: 'syn_reply'; streamId: number; flags: number; headerBlock: Buffer }
  | { type: 'headers'; streamId: number; flags: number; headerBlock: Buffer }
  | { type: 'rst_stream'; streamId: number; status: number }
  | { type: 'settings' }
  | { type: 'ping'; id: number }
  | { type: 'goaway'; lastGoodId: number; status: number }
  | { type: 'window_update'; streamId: number; delta: number }
  | { type: 'unknown'; frameType: number };

export class SpdyProtocolError extends Error {}

/** A frame longer than the reader accepts (refused from its header, before its body is read). */
export class FrameTooLarge extends SpdyProtocolError {
  constructor(readonly length: number, readonly limit: number) {
    super(`a SPDY frame of ${length} bytes exceeds the limit of ${limit}`);
  }
}

/** A compressed header block that expands past what the session accepts (a decompression bomb). */
export class HeaderBlockTooLarge extends SpdyProtocolError {
  constructor(readonly limit: number) {
    super(`a SPDY header block expands past the limit of ${limit} bytes`);
  }
}

/**
 * Reassembles frames from socket reads in linear time: a frame inside one read is a view of it (no
 * copy); a frame spread over reads is copied once into a buffer of its exact size, allocated when its
 * header is in. So each byte is copied at most once and no read is kept beyond the frame it belongs to.
 * A frame longer than `maxPayload` is refused as soon as its header is in, before its body is buffered.
 * After a protocol error (that, or a frame no SPDY/3 peer sends) the reader takes nothing more.
 */
export class FrameReader {
  private readonly header = Buffer.alloc(8);
  private headerFill = 0;
  /** The frame being filled (header included), once its header is in. */
  private frame: Buffer | undefined;
  private frameFill = 0;
  private failed: SpdyProtocolError | undefined;

  constructor(private readonly maxPayload = MAX_FRAME_PAYLOAD) {}

  /** Bytes held for a frame not yet complete. */
  get buffered(): number {
    return this.frame ? this.frameFill : this.headerFill;
  }

  /** Adds one read; returns the frames it completed, in order, and the protocol error that stopped it. */
  push(bytes: Buffer): { frames: Frame[]; error?: SpdyProtocolError } {
    const frames: Frame[] = [];
    if (this.failed) return { frames, error: this.failed };
    try {
      this.read(bytes, frames);
    } catch (err) {
      if (!(err instanceof SpdyProtocolError)) throw err;
      this.failed = err;
      return { frames, error: err };
    }
    return { frames };
  }

  private read(bytes: Buffer, frames: Frame[]): void {
    let off = 0;
    while (off < bytes.length) {
      if (!this.frame && this.headerFill === 0 && bytes.length - off >= 8) {
        const whole = 8 + this.payloadLength(bytes, off);
        if (bytes.length - off >= whole) {
          frames.push(parseFrame(bytes.subarray(off, off + whole)));
          off += whole;
          continue;
        }
      }
      if (!this.frame) {
        const n = Math.min(8 - this.headerFill, bytes.length - off);
        bytes.copy(this.header, this.headerFill, off, off + n);
        this.headerFill += n;
        off += n;
        if (this.headerFill < 8) break;
        this.frame = Buffer.allocUnsafe(8 + this.payloadLength(this.header, 0));
        this.header.copy(this.frame);
        this.frameFill = 8;
        this.headerFill = 0;
      }
      const n = Math.min(this.frame.length - this.frameFill, bytes.length - off);
      bytes.copy(this.frame, this.frameFill, off, off + n);
      this.frameFill += n;
      off += n;
      if (this.frameFill === this.frame.length) {
        const done = this.frame;
        this.frame = undefined;
        frames.push(parseFrame(done));
      }
    }
  }

  private payloadLength(buf: Buffer, off: number): number {
    const length = buf.readUIntBE(off + 5, 3);
    if (length > this.maxPayload) throw new FrameTooLarge(length, this.maxPayload);
    return length;
  }
}

/** Decodes one whole frame (header and body). */
export function parseFrame(frame: Buffer): Frame {
  const flags = frame[4]!;
  const body = frame.subarray(8);
  if ((frame[0]! & 0x80) === 0) return { type: 'data', streamId: frame.readUInt32BE(0) & 0x7fffffff, flags, data: body };
  const version = frame.readUInt16BE(0) & 0x7fff;
  if (version !== SPDY_VERSION) throw new SpdyProtocolError(`unsupported SPDY version ${version}`);
  return controlFrame(frame.readUInt16BE(2), flags, body);
}

function need(body: Buffer, n: number, what: string): void {
  if (body.length < n) throw new SpdyProtocolError(`${what} frame too short (${body.length} bytes)`);
}

function controlFrame(type: number, flags: number, body: Buffer): Frame {
  const id = () => body.readUInt32BE(0) & 0x7fffffff;
  switch (type) {
    case FrameType.SynStream:
      need(body, 10, 'SYN_STREAM');
      return {
        type: 'syn_stream', streamId: id(), associatedId: body.readUInt32BE(4) & 0x7fffffff, priority: body[8]! >> 5, flags,
        headerBlock: body.subarray(10),
      };
    case FrameType.SynReply:
      need(body, 4, 'SYN_REPLY');
      return { type: 'syn_reply', streamId: id(), flags, headerBlock: body.subarray(4) };
    case FrameType.Headers:
      need(body, 4, 'HEADERS');
      return { type: 'headers', streamId: id(), flags, headerBlock: body.subarray(4) };
    case FrameType.RstStream:
      need(body, 8, 'RST_STREAM');
      return { type: 'rst_stream', streamId: id(), status: body.readUInt32BE(4) };
    case FrameType.Settings:
      return { type: 'settings' };
    case FrameType.Ping:
      need(body, 4, 'PING');
      return { type: 'ping', id: body.readUInt32BE(0) };
    case FrameType.GoAway:
      need(body, 4, 'GOAWAY');
      return { type: 'goaway', lastGoodId: id(), status: body.length >= 8 ? body.readUInt32BE(4) : 0 };
    case FrameType.WindowUpdate:
      need(body, 8, 'WINDOW_UPDATE');
      return { type: 'window_update', streamId: id(), delta: body.readUInt32BE(4) & 0x7fffffff };
    default:
      // SPDY says unknown control frames are ignored.
      return { type: 'unknown', frameType: type };
  }
}

function controlHeader(type: FrameType, flags: number, length: number): Buffer {
  const h = Buffer.alloc(8);
  h.writeUInt16BE(0x8000 | SPDY_VERSION, 0);
  h.writeUInt16BE(type, 2);
  h.writeUInt32BE(length, 4);
  h[4] = flags;
  return h;
}

export function encodeData(streamId: number, data: Buffer, fin: boolean): Buffer {
  if (data.length > MAX_FRAME_PAYLOAD) throw new RangeError(`DATA payload of ${data.length} bytes is too large`);
  const h = Buffer.alloc(8);
  h.writeUInt32BE(streamId & 0x7fffffff, 0);
  h.writeUInt32BE(data.length, 4);
  h[4] = fin ? FLAG_FIN : 0;
  return Buffer.concat([h, data]);
}

export function encodeSynStream(streamId: number, compressedHeaders: Buffer, flags = 0): Buffer {
  const body = Buffer.alloc(10);
  body.writeUInt32BE(streamId & 0x7fffffff, 0);
  return Buffer.concat([controlHeader(FrameType.SynStream, flags, 10 + compressedHeaders.length), body, compressedHeaders]);
}

export function encodeSynReply(streamId: number, compressedHeaders: Buffer, flags = 0): Buffer {
  const id = Buffer.alloc(4);
  id.writeUInt32BE(streamId & 0x7fffffff, 0);
  return Buffer.concat([controlHeader(FrameType.SynReply, flags, 4 + compressedHeaders.length), id, compressedHeaders]);
}

export function encodeRstStream(streamId: number, status: number): Buffer {
  const body = Buffer.alloc(8);
  body.writeUInt32BE(streamId & 0x7fffffff, 0);
  body.writeUInt32BE(status, 4);
  return Buffer.concat([controlHeader(FrameType.RstStream, 0, 8), body]);
}

export function encodePing(id: number): Buffer {
  const body = Buffer.alloc(4);
  body.writeUInt32BE(id >>> 0, 0);
  return Buffer.concat([controlHeader(FrameType.Ping, 0, 4), body]);
}

export function encodeGoAway(lastGoodId: number, status = 0): Buffer {
  const body = Buffer.alloc(8);
  body.writeUInt32BE(lastGoodId & 0x7fffffff, 0);
  body.writeUInt32BE(status, 4);
  return Buffer.concat([controlHeader(FrameType.GoAway, 0, 8), body]);
}

/** Header names are lower case on the wire; a name repeated joins its values with NUL. */
export type SpdyHeaders = Record<string, string>;

/** The uncompressed name/value block: a 32-bit count, then length-prefixed names and values. */
export function encodeHeaderBlock(headers: SpdyHeaders): Buffer {
  const parts: Buffer[] = [];
  const count = Buffer.alloc(4);
  count.writeUInt32BE(Object.keys(headers).length, 0);
  parts.push(count);
  for (const [name, value] of Object.entries(headers)) {
    for (const s of [name.toLowerCase(), value]) {
      const b = Buffer.from(s, 'utf8');
      const len = Buffer.alloc(4);
      len.writeUInt32BE(b.length, 0);
      parts.push(len, b);
    }
  }
  return Buffer.concat(parts);
}

export function decodeHeaderBlock(block: Buffer): SpdyHeaders {
  const fail = () => new SpdyProtocolError('malformed SPDY header block');
  if (block.length < 4) throw fail();
  const count = block.readUInt32BE(0);
  const headers: SpdyHeaders = {};
  let off = 4;
  const str = () => {
    if (off + 4 > block.length) throw fail();
    const len = block.readUInt32BE(off);
    off += 4;
    if (off + len > block.length) throw fail();
    const s = block.toString('utf8', off, off + len);
    off += len;
    return s;
  };
  for (let i = 0; i < count; i++) {
    const name = str().toLowerCase();
    const value = str();
    headers[name] = name in headers ? `${headers[name]}\0${value}` : value;
  }
  return headers;
}

/**
 * The SPDY/3 header compression dictionary (a fact of the protocol, draft-mbelshe-httpbis-spdy §2.6.10.1):
 * length-prefixed header words, then a run of common values. Built from its parts rather than kept as
 * 1423 hex bytes.
 */
export const HEADER_DICTIONARY: Buffer = (() => {
  const words = [
    'options', 'head', 'post', 'put', 'delete', 'trace', 'accept', 'accept-charset', 'accept-encoding', 'accept-language',
    'accept-ranges', 'age', 'allow', 'authorization', 'cache-control', 'connection', 'content-base', 'content-encoding',
    'content-language', 'content-length', 'content-location', 'content-md5', 'content-range', 'content-type', 'date', 'etag',
    'expect', 'expires', 'from', 'host', 'if-match', 'if-modified-since', 'if-none-match', 'if-range', 'if-unmodified-since',
    'last-modified', 'location', 'max-forwards', 'pragma', 'proxy-authenticate', 'proxy-authorization', 'range', 'referer',
    'retry-after', 'server', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'user-agent', 'vary', 'via', 'warning',
    'www-authenticate', 'method', 'get', 'status', '200 OK', 'version', 'HTTP/1.1', 'url', 'public', 'set-cookie', 'keep-alive', 'origin',
  ];
  const tail = '100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505'
    + '203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized'
    + '403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable'
    + 'Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT'
    + 'chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,text/javascript,'
    + 'publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.';
  const parts = words.map((w) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(w.length, 0);
    return Buffer.concat([len, Buffer.from(w, 'latin1')]);
  });
  return Buffer.concat([...parts, Buffer.from(tail, 'latin1')]);
})();
