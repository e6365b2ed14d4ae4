// Containers as they are now: a running container whose process has exited becomes EXITED with the
// code conmon wrote. Exit files outlive the daemon, so an exit that happened while it was down is seen
// here too. And the runtime a container runs under.
import { FailedPrecondition } from '../core/errors.js';
import type { ExitStatus } from '../oci/runtime/runc.js';
import type { PodContext } from './context.js';
import type { ContainerRuntime } from './interfaces.js';
import type { ContainerRecord } from './records.js';
import { markContainerExited } from './state.js';

export async function refreshContainer(ctx: PodContext, record: ContainerRecord): Promise<ContainerRecord> {
  if (!containerMayHaveExited(ctx, record)) return record;
  const exit = await runtimeFor(ctx, record)!.exitStatus(record.id);
  // A concurrent RemoveContainer may have deleted the record meanwhile: answer with what we had.
  if (!exit || !ctx.tables.containers.get(record.id)) return record;
  return recordExit(ctx, record.id, exit);
}

/** The container with that id or unique prefix, refreshed. */
export function containerNow(ctx: PodContext, idOrPrefix: string): Promise<ContainerRecord> {
  return refreshContainer(ctx, ctx.tables.containers.find(idOrPrefix));
}

/** Whether a record says RUNNING while conmon may have written an exit file (the watcher knows without a read). */
export function containerMayHaveExited(ctx: PodContext, record: ContainerRecord): boolean {
  return record.state === 'CONTAINER_RUNNING' && runtimeFor(ctx, record)?.exits.mayHaveExited(record.id) === true;
}

/** Records a container as exited, with conmon's exit status or without one (see markContainerExited). */
export function recordExit(ctx: PodContext, id: string, exit: ExitStatus | undefined): ContainerRecord {
  return ctx.tables.containers.update(id, (r) => markContainerExited(r, exit));
}

/** The runtime handler a container's sandbox runs under. */
export function handlerOf(ctx: PodContext, record: ContainerRecord): string {
  return ctx.tables.sandboxes.get(record.sandboxId)?.runtimeHandler ?? ctx.settings.default_runtime;
}

/** The runtime a container's sandbox runs under, if that handler is still configured. */
export function runtimeFor(ctx: PodContext, record: ContainerRecord): ContainerRuntime | undefined {
  return ctx.runtimes.get(handlerOf(ctx, record));
}

/** Like runtimeFor, but a handler no longer configured is FAILED_PRECONDITION. */
export function runtimeOf(ctx: PodContext, record: ContainerRecord): ContainerRuntime {
  const runtime = runtimeFor(ctx, record);
  if (!runtime) {
    throw new FailedPrecondition(
      `runtime handler "${handlerOf(ctx, record)}" of container ${record.id} is no longer configured: ` +
        'add it back to the config and restart',
    );
  }
  return runtime;
}

/** A container that must be running for `verb` (exec in, attach to, ...): refreshed, else FAILED_PRECONDITION. */
export async function runningContainer(ctx: PodContext, idOrPrefix: string, verb: string): Promise<ContainerRecord> {
  const record = await containerNow(ctx, idOrPrefix);
  if (record.state !== 'CONTAINER_RUNNING') {
    throw new FailedPrecondition(
      `container "${record.id}" is ${record.state}, not running: cannot ${verb} it; start it or pick a running one`,
    );
  }
  return record;
}
