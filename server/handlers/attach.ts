// Attach: checked against the records, answered with a single-use URL on the streaming server.
import { attachTarget } from '../../pod/container-sessions.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function Attach(edge: Edge): RuntimeRpc<'Attach'> {
  return async (r) => {
    const record = await attachTarget(edge.pods, r.container_id, r);
    return {
      url: edge.streaming.url({ verb: 'attach', containerId: record.id, tty: r.tty, stdin: r.stdin, stdout: r.stdout, stderr: r.stderr }),
    };
  };
}
