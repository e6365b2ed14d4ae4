// Exec: checked against the records, answered with a single-use URL on the streaming server.
import { execTarget } from '../../pod/container-sessions.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function Exec(edge: Edge): RuntimeRpc<'Exec'> {
  return async (r) => {
    const record = await execTarget(edge.pods, r.container_id, r.cmd, r);
    return {
      url: edge.streaming.url({
        verb: 'exec', containerId: record.id, cmd: r.cmd, tty: r.tty, stdin: r.stdin, stdout: r.stdout, stderr: r.stderr,
      }),
    };
  };
}
