// What several container RPCs share: refreshing a record from conmon's exit file, and the CRI shapes.
import type { Container } from '../gen/runtime/v1/Container.js';
import type { ContainerStatus } from '../gen/runtime/v1/ContainerStatus.js';
import type { ImageRecord } from '../oci/image/types.js';
import type { ExitStatus, OciRuntime } from '../oci/runtime/runc.js';
import type { ImageConfig as SpecImageConfig } from '../oci/runtime/spec/index.js';
import type { Deps } from './context.js';
import { FailedPrecondition } from '../core/errors.js';
import { nanosFromMillis, nowNanos, type ContainerRecord } from './records.js';

/** The image config in the shape the spec builders read (OCI field names). */
export function specImageConfig(image: ImageRecord): SpecImageConfig {
  const c = image.config;
  return {
    Entrypoint: c.entrypoint, Cmd: c.cmd, Env: c.env, WorkingDir: c.workingDir, User: c.user,
    Volumes: Object.fromEntries(c.volumes.map((v) => [v, {}])), StopSignal: c.stopSignal,
  };
}

/** Kubernetes' reasons for an exit: OOMKilled, Completed (0), or Error. */
function exitReason(exitCode: number, oomKilled: boolean): string {
  if (oomKilled) return 'OOMKilled';
  return exitCode === 0 ? 'Completed' : 'Error';
}

/**
 * A running container whose process has exited becomes EXITED with the code conmon wrote.
 * Exit files outlive the daemon, so an exit that happened while it was down is seen here too.
 */
export async function refreshContainer(deps: Deps, record: ContainerRecord): Promise<ContainerRecord> {
  if (!containerMayHaveExited(deps, record)) return record;
  const exit = await runtimeFor(deps, record)!.exitStatus(record.id);
  // A concurrent RemoveContainer may have deleted the record meanwhile: answer with what we had.
  if (!exit || !deps.tables.containers.get(record.id)) return record;
  return recordExit(deps, record.id, exit);
}

/** Whether a record says RUNNING while conmon may have written an exit file (the watcher knows without a read). */
export function containerMayHaveExited(deps: Deps, record: ContainerRecord): boolean {
  return record.state === 'CONTAINER_RUNNING' && runtimeFor(deps, record)?.exits.mayHaveExited(record.id) === true;
}

/**
 * Records a container as exited: with conmon's exit status, or, when there is none (conmon died, or
 * runc lost the container), as exit code 255 with reason Unknown, so it never stays RUNNING.
 */
export function recordExit(deps: Deps, id: string, exit: ExitStatus | undefined): ContainerRecord {
  return deps.tables.containers.update(id, (r) => {
    r.state = 'CONTAINER_EXITED';
    r.exitCode = exit?.exitCode ?? 255;
    // The exit file's time has millisecond precision: never report a finish before the start.
    const finished = BigInt(exit ? nanosFromMillis(exit.finishedAt.getTime()) : nowNanos());
    r.finishedAt = (finished > BigInt(r.startedAt) ? finished : BigInt(r.startedAt)).toString();
    r.reason = exit ? exitReason(exit.exitCode, exit.oomKilled) : 'Unknown';
    if (!exit) r.message = 'the container stopped without an exit status from conmon';
  });
}

/** The runtime handler a container's sandbox runs under. */
function handlerOf(deps: Deps, record: ContainerRecord): string {
  return deps.tables.sandboxes.get(record.sandboxId)?.runtimeHandler ?? deps.config.default_runtime;
}

/** The runtime a container's sandbox runs under, if that handler is still configured. */
export function runtimeFor(deps: Deps, record: ContainerRecord): OciRuntime | undefined {
  return deps.runtimes.get(handlerOf(deps, record));
}

/** Like runtimeFor, but a handler no longer configured is FAILED_PRECONDITION. */
export function runtimeOf(deps: Deps, record: ContainerRecord): OciRuntime {
  const runtime = runtimeFor(deps, record);
  const handler = handlerOf(deps, record);
  if (!runtime) throw new FailedPrecondition(`runtime handler "${handler}" of container ${record.id} is no longer configured: add it back to the config and restart`);
  return runtime;
}

/** The container's image: `image` as the client named it in CreateContainer, and user_specified_image only when
 *  the client gave one (kubelet passes the pod spec's image there and a resolved reference in `image`). */
function imageSpec(r: ContainerRecord): { image: string; user_specified_image: string } {
  return { image: r.image.name, user_specified_image: r.config.image?.user_specified_image ?? '' };
}

export function containerSummary(r: ContainerRecord): Container {
  return {
    id: r.id, pod_sandbox_id: r.sandboxId, metadata: r.config.metadata,
    image: imageSpec(r),
    // The image ID, as containerd lists it: kubelets before 1.30 (no image_id) take this field as the ID their
    // image GC matches against ListImages. ContainerStatus gives the digested reference, for the pod status.
    image_ref: r.image.id, image_id: r.image.id, state: r.state, created_at: r.createdAt,
    labels: r.config.labels, annotations: r.config.annotations,
  };
}

export function containerStatus(r: ContainerRecord): ContainerStatus {
  return {
    id: r.id, metadata: r.config.metadata, state: r.state,
    created_at: r.createdAt, started_at: r.startedAt, finished_at: r.finishedAt, exit_code: r.exitCode,
    image: imageSpec(r),
    image_ref: r.image.ref, image_id: r.image.id, reason: r.reason, message: r.message,
    labels: r.config.labels, annotations: r.config.annotations,
    mounts: r.config.mounts, log_path: r.logPath,
    resources: r.config.linux?.resources ? { linux: r.config.linux.resources } : null,
  };
}
