// PortForward: checked against the records, answered with a single-use URL on the streaming server.
import { portForwardTarget } from '../../pod/container-sessions.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function PortForward(edge: Edge): RuntimeRpc<'PortForward'> {
  return (r) => {
    const sandbox = portForwardTarget(edge.pods, r.pod_sandbox_id, r.port);
    return { url: edge.streaming.url({ verb: 'portforward', sandboxId: sandbox.id, ports: r.port }) };
  };
}
