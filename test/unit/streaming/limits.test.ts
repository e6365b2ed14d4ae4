// The streaming limits: documented defaults, config keys, and refusals that name them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseConfig } from '../../../server/config.js';
import { streamingLimits } from '../../../server/streaming-backend.js';
import { closeReason, DEFAULT_LIMITS, LIMIT_KEYS, limitMessage, protocolFailureMessage } from '../../../streaming/limits.js';
import { FrameTooLarge } from '../../../streaming/spdy-frames.js';

describe('streaming limits', () => {
  it('have the documented defaults, from the config keys the refusals name', () => {
    assert.deepEqual(DEFAULT_LIMITS, {
      maxSessions: 128, maxSessionsPerTarget: 16, maxPortForwardPairs: 64, inputBufferBytes: 1024 * 1024, maxFrameBytes: 1024 * 1024,
    });
    assert.deepEqual(streamingLimits(parseConfig({}).streaming), DEFAULT_LIMITS);
    const raised = parseConfig({ streaming: { max_sessions: 500, max_sessions_per_container: 40, max_port_forward_pairs: 256, input_buffer_bytes: 4 << 20, max_frame_bytes: 2 << 20 } });
    assert.deepEqual(streamingLimits(raised.streaming), { maxSessions: 500, maxSessionsPerTarget: 40, maxPortForwardPairs: 256, inputBufferBytes: 4 << 20, maxFrameBytes: 2 << 20 });
    for (const key of Object.values(LIMIT_KEYS)) assert.match(key, /^streaming\.[a-z_]+$/);
    // SPDY's length field has 24 bits; a buffer under 64 KiB would stall ordinary 32 KiB writes.
    assert.throws(() => parseConfig({ streaming: { max_frame_bytes: 1 << 24 } }), /streaming\.max_frame_bytes/);
    assert.throws(() => parseConfig({ streaming: { input_buffer_bytes: 1024 } }), /streaming\.input_buffer_bytes/);
  });

  it('refusals name the limit and the key that raises it', () => {
    assert.equal(limitMessage(DEFAULT_LIMITS, 'maxSessionsPerTarget', '16 streaming sessions are open to container c1'),
      '16 streaming sessions are open to container c1: the limit is 16 (config key streaming.max_sessions_per_container)');
    assert.match(protocolFailureMessage(new FrameTooLarge(16 << 20, 1 << 20), DEFAULT_LIMITS), /16777216 bytes.*limit is 1048576 \(config key streaming\.max_frame_bytes\)/);
    const long = limitMessage(DEFAULT_LIMITS, 'maxPortForwardPairs', `${'9'.repeat(200)} ports asked for`);
    assert.equal(Buffer.byteLength(closeReason(long)), 123);
    assert.equal(closeReason('short'), 'short');
  });
});
