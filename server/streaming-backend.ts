// The streaming server's sessions, run by the pod domain when a client connects to an issued URL.
import { podConnector, runAttach, runExec } from '../pod/container-sessions.js';
import type { PodContext } from '../pod/context.js';
import type { StreamingBackend } from '../streaming/server.js';

/** `pods` is asked for at each session: the streaming server starts before the domain is wired. */
export function streamingBackend(pods: () => PodContext): StreamingBackend {
  return {
    exec: (req, io) => runExec(pods(), req.containerId, req.cmd, req.tty, io),
    attach: (req, io) => runAttach(pods(), req.containerId, io),
    portForward: async (req) => podConnector(pods(), req.sandboxId),
  };
}
