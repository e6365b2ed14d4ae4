// The state machine of sandboxes and containers. A record's state changes only here, through named
// transitions that refuse an illegal move (a bug of ours, so INTERNAL), so no caller can write one.
// Each transition changes a record in place: callers apply it inside a table update.
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

function moveContainer(r: ContainerRecord, to: ContainerState): void {
  if (!CONTAINER_MOVES[r.state].includes(to)) throw new Internal(`container ${r.id} cannot go from ${r.state} to ${to}`);
  r.state = to;
}

/** RunPodSandbox finished: the pause runs and the network is attached. */
export function markSandboxReady(r: SandboxRecord): void {
  if (!r.creating || r.state !== 'SANDBOX_NOTREADY') throw new Internal(`sandbox ${r.id} cannot become ready: it is ${r.state}${r.creating ? '' : ' and not being created'}`);
  r.state = 'SANDBOX_READY';
  delete r.creating;
}

/** The pause is stopped or gone: kubelet makes a new sandbox. Always legal (stopping is idempotent). */
export function markSandboxNotReady(r: SandboxRecord): void {
  r.state = 'SANDBOX_NOTREADY';
}

/** CreateContainer finished: runc holds the container, created and not started. */
export function markContainerCreated(r: ContainerRecord, pid: number): void {
  if (!r.creating || r.state !== 'CONTAINER_CREATED') throw new Internal(`container ${r.id} cannot finish its creation: it is ${r.state}`);
  r.pid = pid;
  delete r.creating;
}

/** `runc start` succeeded; `startedAt` is taken before it, as the process may exit before start returns. */
export function markContainerRunning(r: ContainerRecord, startedAt: string): void {
  moveContainer(r, 'CONTAINER_RUNNING');
  r.startedAt = startedAt;
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
export function markContainerExited(r: ContainerRecord, exit: ExitStatus | undefined): void {
  moveContainer(r, 'CONTAINER_EXITED');
  r.exitCode = exit?.exitCode ?? 255;
  // The exit file's time has millisecond precision: never report a finish before the start.
  const finished = BigInt(exit ? nanosFromMillis(exit.finishedAt.getTime()) : nowNanos());
  r.finishedAt = (finished > BigInt(r.startedAt) ? finished : BigInt(r.startedAt)).toString();
  r.reason = exit ? exitReason(exit.exitCode, exit.oomKilled) : 'Unknown';
  if (!exit) r.message = 'the container stopped without an exit status from conmon';
}

/** `runc start` failed: the container is over; kubelet reads the reason and creates a new one. */
export function markStartFailed(r: ContainerRecord, message: string): void {
  moveContainer(r, 'CONTAINER_EXITED');
  Object.assign(r, { exitCode: 128, reason: 'StartError', message, finishedAt: nowNanos() });
}

/** Stopped before it was started: it never ran, and that must not read as a success. */
export function markNeverStarted(r: ContainerRecord): void {
  if (r.state !== 'CONTAINER_CREATED') throw new Internal(`container ${r.id} is ${r.state}: only a created container can be stopped unstarted`);
  moveContainer(r, 'CONTAINER_EXITED');
  Object.assign(r, { exitCode: 255, reason: 'Error', message: 'stopped before it was started' });
}

/** Neither an exit file nor runc state is left (a reboot emptied /run): the container is lost. */
export function markContainerLost(r: ContainerRecord, message: string): void {
  moveContainer(r, 'CONTAINER_EXITED');
  Object.assign(r, { exitCode: 255, reason: 'Unknown', message });
}
