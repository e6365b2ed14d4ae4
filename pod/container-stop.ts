// StopContainer: the stop signal in force, then SIGKILL after the timeout. Idempotent.
import { NotFound } from '../core/errors.js';
import { faultPoint } from '../core/faults.js';
import type { Logger } from '../core/log.js';
import { recordExit, refreshContainer, runtimeOf } from './container-refresh.js';
import type { PodContext } from './context.js';
import { markNeverStarted } from './state.js';

/**
 * Stops the container with that id or unique prefix, giving it `timeoutSec` before SIGKILL. One that is gone
 * is stopped already (the CRI makes stop idempotent).
 */
export async function stopContainer(ctx: PodContext, idOrPrefix: string, timeoutSec: number, log: Logger): Promise<void> {
  const found = ctx.tables.containers.lookup(idOrPrefix);
  if (!found) {
    log.debug({ containerId: idOrPrefix }, 'stop of a container that does not exist: nothing to do');
    return;
  }
  await ctx.locks.run(found.id, () => stopContainerLocked(ctx, found.id, Math.max(0, timeoutSec), log));
}

/** Stops one container (the caller holds its lock); a container that is not running is left as is. */
export async function stopContainerLocked(ctx: PodContext, id: string, timeoutSec: number, log: Logger): Promise<void> {
  // Looked up under the lock: a Remove that held it before us may have taken the container away.
  const found = ctx.tables.containers.get(id);
  if (!found) return;
  const record = await refreshContainer(ctx, found);
  if (record.state === 'CONTAINER_EXITED') return;
  const runtime = runtimeOf(ctx, record);
  if (record.state === 'CONTAINER_RUNNING') {
    // runc no longer knowing the container means it is not running: stopped is what was asked.
    await runtime.stop(id, { timeoutSec, signal: record.stopSignal }).catch((err: unknown) => {
      if (!(err instanceof NotFound)) throw err;
    });
    faultPoint('container-stopped');
    // Read directly, not through the exit watcher, which may not have seen the file yet.
    recordExit(ctx, id, await runtime.exitStatus(id));
  } else {
    // Created but never started: there is no process to signal; it simply never ran.
    await runtime.delete(id, { force: true, bundle: record.dir });
    ctx.tables.containers.update(id, markNeverStarted);
  }
  log.info({ containerId: id }, 'container stopped');
}
