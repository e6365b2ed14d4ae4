// ExecSync: run a command in a running container and return its output and exit code.
import { DeadlineExceeded, FailedPrecondition, InvalidArgument } from '../core/errors.js';
import type { ExecSyncResult } from '../oci/runtime/exec.js';
import { containerNow, runtimeOf } from './container-refresh.js';
import type { PodContext } from './context.js';

/** kubelet caps exec output at 16 MiB; so do we, without waiting on the rest. */
const MAX_EXEC_OUTPUT = 16 * 1024 * 1024;

export async function execSync(ctx: PodContext, idOrPrefix: string, cmd: string[], timeoutSec: number): Promise<ExecSyncResult> {
  if (cmd.length === 0) throw new InvalidArgument('ExecSync needs a command');
  const record = await containerNow(ctx, idOrPrefix);
  if (record.state !== 'CONTAINER_RUNNING') {
    throw new FailedPrecondition(`container ${record.id} is ${record.state}, not running: cannot exec into it`);
  }
  const result = await runtimeOf(ctx, record).execSync(record.id, cmd, { timeoutSec, maxOutputBytes: MAX_EXEC_OUTPUT });
  if (result.timedOut) throw new DeadlineExceeded(`command ${JSON.stringify(cmd)} timed out after ${timeoutSec}s and was killed`);
  return result;
}
