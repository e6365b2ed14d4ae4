// ExecSync: run a command in a running container and return its output and exit code.
import type { Deps } from '../pod/context.js';
import { DeadlineExceeded, FailedPrecondition, InvalidArgument } from '../core/errors.js';
import type { RuntimeHandlers } from './runtime-service.js';
import { refreshContainer, runtimeOf } from '../pod/container-refresh.js';

/** kubelet caps exec output at 16 MiB; so do we, without waiting on the rest. */
const MAX_EXEC_OUTPUT = 16 * 1024 * 1024;

export function containerExecHandlers(deps: Deps): RuntimeHandlers {
  return {
    ExecSync: async (request) => {
      if (request.cmd.length === 0) throw new InvalidArgument('ExecSync needs a command');
      const record = await refreshContainer(deps, deps.tables.containers.find(request.container_id));
      if (record.state !== 'CONTAINER_RUNNING') throw new FailedPrecondition(`container ${record.id} is ${record.state}, not running: cannot exec into it`);
      const timeoutSec = Number(request.timeout);
      const result = await runtimeOf(deps, record).execSync(record.id, request.cmd, { timeoutSec, maxOutputBytes: MAX_EXEC_OUTPUT });
      if (result.timedOut) throw new DeadlineExceeded(`command ${JSON.stringify(request.cmd)} timed out after ${timeoutSec}s and was killed`);
      return { stdout: result.stdout, stderr: result.stderr, exit_code: result.exitCode };
    },
  };
}
