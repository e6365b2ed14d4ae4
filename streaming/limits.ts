// The streaming server's limits, with the config keys that raise them: what a refusal tells the client
// so a person can act on it. Pure.
import { FrameTooLarge, type SpdyProtocolError } from './spdy-frames.js';

export interface StreamingLimits {
  /** Sessions open at once on the node. */
  maxSessions: number;
  /** Sessions open at once to one container (exec, attach) or one pod sandbox (port-forward). */
  maxSessionsPerTarget: number;
  /** Data/error stream pairs (forwarded connections) one port-forward session has open at once. */
  maxPortForwardPairs: number;
  /** Client bytes one session holds for readers that are behind; past it, the client's connection is paused. */
  inputBufferBytes: number;
  /** The largest SPDY frame payload (and WebSocket message) accepted. */
  maxFrameBytes: number;
}

/** Kubernetes clients write stdin and forwarded bytes in 32 KiB pieces: see README "Streaming limits". */
export const DEFAULT_LIMITS: StreamingLimits = {
  maxSessions: 128,
  maxSessionsPerTarget: 16,
  maxPortForwardPairs: 64,
  inputBufferBytes: 1 << 20,
  maxFrameBytes: 1 << 20,
};

export const LIMIT_KEYS: Record<keyof StreamingLimits, string> = {
  maxSessions: 'streaming.max_sessions',
  maxSessionsPerTarget: 'streaming.max_sessions_per_container',
  maxPortForwardPairs: 'streaming.max_port_forward_pairs',
  inputBufferBytes: 'streaming.input_buffer_bytes',
  maxFrameBytes: 'streaming.max_frame_bytes',
};

/** "<what happened>: the limit is N (config key K)". */
export function limitMessage(limits: StreamingLimits, limit: keyof StreamingLimits, what: string): string {
  return `${what}: the limit is ${limits[limit]} (config key ${LIMIT_KEYS[limit]})`;
}

/** A WebSocket close reason: at most 123 bytes of UTF-8 (RFC 6455 §5.5), cut if longer. */
export function closeReason(text: string): string {
  let s = text;
  while (Buffer.byteLength(s) > 123) s = s.slice(0, -1);
  return s;
}

/** Why a SPDY session was closed for breaking the protocol or a limit, for its error stream(s). */
export function protocolFailureMessage(err: SpdyProtocolError, limits: StreamingLimits): string {
  if (err instanceof FrameTooLarge) {
    return limitMessage(limits, 'maxFrameBytes', `a SPDY frame of ${err.length} bytes was refused and the session closed`);
  }
  return `the session was closed: ${err.message}`;
}
