// The state machine of sandboxes and containers. A record's state changes only here, through named
// transitions that refuse an illegal move (a bug of ours, so INTERNAL), so no caller can write one.
// Each transition leaves the record it is given as it was and returns the moved one, for the table's
// update to write: `tables.containers.update(id, (r) => markContainerRunning(r, startedAt))`.
import { Internal } from '../core/errors.js';
import { nanosFromMillis, nowNanos } from '../core/time.js';
import type { ExitStatus } from '../oci/runtime/runc.js';
import type { ContainerRecord, ContainerState, SandboxRecord } from './records.js';

/** The states a container may move to from each state. EXITED → EXITED re-records an exit already seen. */
const CONTAINER_MOVES: Record<ContainerState, readonly ContainerState[]> = {
  CONTAINER_CREATED: ['CONTAINER_RUNNING', 'CONTAINER_EXITED'],
  CONTAINER_RUNNING: ['CONTAINER_EXITED'],
  CONTAINER_EXITED: ['CONTAINER_EXITED'],
  CONTAINER_UNKNOWN: ['CONTAINER_EXITED'],
};

/** The record moved to `to`, if that move is legal, with `change` applied. */
function moveContainer(r: Readonly<ContainerRecord>, to: ContainerState, change: Partial<ContainerRecord> = {}): ContainerRecord {
  if (!CONTAINER_MOVES[r.state].includes(to)) throw new Internal(`container ${r.id} cannot go from ${r.state} to ${to}`);
  return { ...r, ...change, state: to };
}

/** RunPodSandbox finished: the pause runs and the network is attached. */
export function markSandboxReady(r: Readonly<SandboxRecord>): SandboxRecord {
  if (!r.creating || r.state !== 'SANDBOX_NOTREADY') {
    throw new Internal(`sandbox ${r.id} cannot become ready: it is ${r.state}${r.creating ? '' : ' and not being created'}`);
  }
  const { creating: _, ...ready } = r;
  return { ...ready, state: 'SANDBOX_READY' };
}

/** The pause is stopped or gone: kubelet makes a new sandbox. Always legal (stopping is idempotent). */
export function markSandboxNotReady(r: Readonly<SandboxRecord>): SandboxRecord {
  return { ...r, state: 'SANDBOX_NOTREADY' };
}

/** CreateContainer finished: runc holds the container, created and not started. */
export function markContainerCreated(r: Readonly<ContainerRecord>, pid: number): ContainerRecord {
  if (!r.creating || r.state !== 'CONTAINER_CREATED') throw new Internal(`container ${r.id} cannot finish its creation: it is ${r.state}`);
  const { creating: _, ...created } = r;
  return { ...created, pid };
}

/** `runc start` succeeded; `startedAt` is taken before it, as the process may exit before start returns. */
export function markContainerRunning(r: Readonly<ContainerRecord>, startedAt: string): ContainerRecord {
  return moveContainer(r, 'CONTAINER_RUNNING', { startedAt });
}

/** Kubernetes' reasons for an exit: OOMKilled, Completed (0), or Error. */
function exitReason(exitCode: number, oomKilled: boolean): string {
  if (oomKilled) return 'OOMKilled';
  return exitCode === 0 ? 'Completed' : 'Error';
}

/**
 * The container's process exited: with conmon's exit status, or, when there is none (conmon died, or runc
 * lost the container), as exit code 255 with reason Unknown, so it never stays RUNNING.
 */
export function markContainerExited(r: Readonly<ContainerRecord>, exit: ExitStatus | undefined): ContainerRecord {
  // The exit file's time has millisecond precision: never report a finish before the start.
  const finished = BigInt(exit ? nanosFromMillis(exit.finishedAt.getTime()) : nowNanos());
  return moveContainer(r, 'CONTAINER_EXITED', {
    exitCode: exit?.exitCode ?? 255,
    finishedAt: (finished > BigInt(r.startedAt) ? finished : BigInt(r.startedAt)).toString(),
    reason: exit ? exitReason(exit.exitCode, exit.oomKilled) : 'Unknown',
    ...(exit ? {} : { message: 'the container stopped without an exit status from conmon' }),
  });
}

/** `runc start` failed: the container is over; kubelet reads the reason and creates a new one. */
export function markStartFailed(r: Readonly<ContainerRecord>, message: string): ContainerRecord {
  return moveContainer(r, 'CONTAINER_EXITED', { exitCode: 128, reason: 'StartError', message, finishedAt: nowNanos() });
}

/** Stopped before it was started: it never ran, and that must not read as a success. */
export function markNeverStarted(r: Readonly<ContainerRecord>): ContainerRecord {
  if (r.state !== 'CONTAINER_CREATED') {
    throw new Internal(`container ${r.id} is ${r.state}: only a created container can be stopped unstarted`);
  }
  return moveContainer(r, 'CONTAINER_EXITED', { exitCode: 255, reason: 'Error', message: 'stopped before it was started' });
}

/** Neither an exit file nor runc state is left (a reboot emptied /run): the container is lost. */
export function markContainerLost(r: Readonly<ContainerRecord>, message: string): ContainerRecord {
  return moveContainer(r, 'CONTAINER_EXITED', { exitCode: 255, reason: 'Unknown', message });
}
