// Hand-built HTTP/2 frames and HPACK blocks for the authority filter's tests and bench. The HPACK
// ends are hpack.js instances playing the client's encoder and the server's decoder.
import hpack from 'hpack.js';
import type { HpackCompressor, HpackDecompressor } from 'hpack.js';

export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
export const DATA = 0x0;
export const HEADERS = 0x1;
export const RST_STREAM = 0x3;
export const SETTINGS = 0x4;
export const PING = 0x6;
export const GOAWAY = 0x7;
export const WINDOW_UPDATE = 0x8;
export const CONTINUATION = 0x9;
export const END_STREAM = 0x1;
export const END_HEADERS = 0x4;
export const PADDED = 0x8;
export const PRIORITY = 0x20;

export type Fields = Array<[string, string]>;

export interface Frame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

export function frame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId, 5);
  return Buffer.concat([head, payload]);
}

/** What a client sends first: the preface, an empty SETTINGS and a WINDOW_UPDATE. */
export function connectionStart(): Buffer {
  const increment = Buffer.alloc(4);
  increment.writeUInt32BE(1 << 20);
  return Buffer.concat([PREFACE, frame(SETTINGS, 0, 0), frame(WINDOW_UPDATE, 0, 0, increment)]);
}

export function parseFrames(bytes: Buffer): Frame[] {
  const frames: Frame[] = [];
  let pos = 0;
  while (pos < bytes.length) {
    if (bytes.length - pos < 9) throw new Error(`trailing ${bytes.length - pos} bytes are not a frame header`);
    const length = bytes.readUIntBE(pos, 3);
    if (bytes.length - pos - 9 < length) throw new Error('truncated frame');
    frames.push({
      type: bytes[pos + 3]!,
      flags: bytes[pos + 4]!,
      streamId: bytes.readUInt32BE(pos + 5) & 0x7fff_ffff,
      payload: bytes.subarray(pos + 9, pos + 9 + length),
    });
    pos += 9 + length;
  }
  return frames;
}

export function clientEncoder(): HpackCompressor {
  return hpack.compressor.create({ table: { maxSize: 4096 } });
}

export function serverDecoder(): HpackDecompressor {
  return hpack.decompressor.create({ table: { maxSize: 4096 } });
}

export function encodeFields(encoder: HpackCompressor, fields: Fields): Buffer {
  encoder.write(fields.map(([name, value]) => ({ name, value })));
  return encoder.read() ?? Buffer.alloc(0);
}

export function decodeBlock(decoder: HpackDecompressor, block: Buffer): Fields {
  decoder.write(block);
  decoder.execute();
  const fields: Fields = [];
  for (let f = decoder.read(); f !== null; f = decoder.read()) fields.push([f.name, f.value]);
  return fields;
}

/** The HPACK "dynamic table size update" instruction (RFC 7541 §6.3): 001 + a 5-bit-prefix integer. */
export function tableSizeUpdate(size: number): Buffer {
  if (size < 31) return Buffer.from([0x20 | size]);
  const bytes = [0x3f];
  let rest = size - 31;
  for (; rest >= 128; rest = Math.floor(rest / 128)) bytes.push(0x80 | (rest % 128));
  bytes.push(rest);
  return Buffer.from(bytes);
}

export interface HeaderBlock {
  streamId: number;
  endStream: boolean;
  block: Buffer;
}

/** Joins HEADERS + CONTINUATION frames into blocks (dropping padding and priority), checking the
 *  sequencing rules a server would. Other frames are returned apart, in order. */
export function splitHeaderBlocks(frames: Frame[]): { blocks: HeaderBlock[]; others: Frame[] } {
  const blocks: HeaderBlock[] = [];
  const others: Frame[] = [];
  let open: { streamId: number; endStream: boolean; parts: Buffer[] } | null = null;
  for (const f of frames) {
    if (f.type === HEADERS) {
      if (open) throw new Error('HEADERS inside an open header block');
      let start = 0;
      let end = f.payload.length;
      if (f.flags & PADDED) { start = 1; end -= f.payload[0]!; }
      if (f.flags & PRIORITY) start += 5;
      open = { streamId: f.streamId, endStream: (f.flags & END_STREAM) !== 0, parts: [f.payload.subarray(start, end)] };
    } else if (f.type === CONTINUATION) {
      if (!open || open.streamId !== f.streamId) throw new Error('stray CONTINUATION');
      open.parts.push(f.payload);
    } else {
      if (open) throw new Error('frame inside an open header block');
      others.push(f);
      continue;
    }
    if (f.flags & END_HEADERS) {
      blocks.push({ streamId: open.streamId, endStream: open.endStream, block: Buffer.concat(open.parts) });
      open = null;
    }
  }
  if (open) throw new Error('header block never ended');
  return { blocks, others };
}

export function requestFields(authority: string | null, path = '/runtime.v1.RuntimeService/Version'): Fields {
  return [
    [':method', 'POST'],
    [':scheme', 'http'],
    [':path', path],
    ...(authority === null ? [] : [[':authority', authority] as [string, string]]),
    ['content-type', 'application/grpc'],
    ['user-agent', 'grpc-go/1.26.0'],
    ['te', 'trailers'],
  ];
}

/** A gRPC length-prefixed message: compressed flag, 4-byte length, bytes. */
export function grpcMessage(message: Buffer): Buffer {
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(message.length, 1);
  return Buffer.concat([prefix, message]);
}
