// ExecSync: a command run in a running container, its output and exit code (pod/container-exec.ts).
import { execSync } from '../../pod/container-exec.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function ExecSync(edge: Edge): RuntimeRpc<'ExecSync'> {
  return async (request) => {
    const result = await execSync(edge.pods, request.container_id, request.cmd, Number(request.timeout));
    return { stdout: result.stdout, stderr: result.stderr, exit_code: result.exitCode };
  };
}
