// The streaming server's sessions, run by the pod domain when a client connects to an issued URL, and
// its limits from the config.
import { podConnector, runAttach, runExec } from '../pod/container-sessions.js';
import type { PodContext } from '../pod/context.js';
import type { StreamingLimits } from '../streaming/limits.js';
import type { StreamingBackend } from '../streaming/server.js';
import type { Config } from './config.js';

/** `pods` is asked for at each session: the streaming server starts before the domain is wired. */
export function streamingBackend(pods: () => PodContext): StreamingBackend {
  return {
    exec: (req, io) => runExec(pods(), req.containerId, req.cmd, req.tty, io),
    attach: (req, io) => runAttach(pods(), req.containerId, io),
    portForward: async (req) => podConnector(pods(), req.sandboxId),
  };
}

export function streamingLimits(c: Config['streaming']): StreamingLimits {
  return {
    maxSessions: c.max_sessions,
    maxSessionsPerTarget: c.max_sessions_per_container,
    maxPortForwardPairs: c.max_port_forward_pairs,
    inputBufferBytes: c.input_buffer_bytes,
    maxFrameBytes: c.max_frame_bytes,
  };
}
