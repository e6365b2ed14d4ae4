// Pod network teardown that cannot be forgotten. A CNI DEL that fails (a broken plugin, a timeout)
// would leak the pod's IP forever if nobody asked again; so a failed teardown is written to the store
// and retried in the background with backoff, across restarts, until it succeeds. Status (verbose)
// lists what is pending.
import type { PodNetworkRequest } from '../cni/manager.js';
import type { Deps } from './context.js';
import type { SandboxRecord } from './records.js';
import { podNetworkRequest } from './sandbox-refresh.js';

export interface PendingTeardown {
  /** The sandbox id. */
  id: string;
  request: PodNetworkRequest;
  attempts: number;
  lastError: string;
  /** Unix ms of the next try. */
  nextAt: number;
}

const FIRST_RETRY_MS = 1000;
const MAX_RETRY_MS = 5 * 60_000;

export function backoff(attempts: number): number {
  return Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** Math.max(0, attempts - 1));
}

/** Records a failed teardown for the background retry. */
export function deferTeardown(deps: Deps, request: PodNetworkRequest, err: unknown): void {
  const previous = deps.tables.teardowns.get(request.sandboxId);
  const attempts = (previous?.attempts ?? 0) + 1;
  deps.tables.teardowns.put({ id: request.sandboxId, request, attempts, lastError: (err as Error).message, nextAt: Date.now() + backoff(attempts) });
}

/** Detaches a sandbox from the pod network; a failure is deferred for retry and rethrown. */
export async function tearDownNetwork(deps: Deps, sandbox: SandboxRecord): Promise<void> {
  const request = podNetworkRequest(sandbox);
  try {
    await deps.cni.tearDownPod(request);
  } catch (err) {
    deferTeardown(deps, request, err);
    throw err;
  }
  deps.tables.teardowns.delete(sandbox.id);
}
