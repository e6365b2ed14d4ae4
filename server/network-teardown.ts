// Pod network teardown that cannot be forgotten. A CNI DEL that fails (a broken plugin, a timeout)
// would leak the pod's IP forever if nobody asked again; so a failed teardown is written to the store
// and retried in the background with backoff, across restarts, until it succeeds. Status (verbose)
// lists what is pending.
import type { PodNetworkRequest } from '../cni/manager.js';
import type { Deps } from './deps.js';
import type { Logger } from './log.js';
import type { SandboxRecord } from './records.js';
import { podNetworkRequest } from './sandbox-common.js';

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

function backoff(attempts: number): number {
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

/** Retries deferred teardowns in the background until each succeeds. */
export class TeardownRetrier {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(private readonly deps: Deps, private readonly log: Logger, private readonly tickMs = 500) {}

  start(): void {
    this.schedule();
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      this.running = this.tick().finally(() => { if (this.timer) this.schedule(); });
    }, this.tickMs);
    this.timer.unref();
  }

  /** One pass over the pending teardowns that are due. */
  async tick(): Promise<void> {
    const due = this.deps.tables.teardowns.list().filter((t) => t.nextAt <= Date.now());
    for (const pending of due) {
      await this.deps.locks.run(pending.id, async () => {
        if (!this.deps.tables.teardowns.get(pending.id)) return;
        try {
          await this.deps.cni.tearDownPod(pending.request);
        } catch (err) {
          deferTeardown(this.deps, pending.request, err);
          this.log.warn({ sandboxId: pending.id, attempts: pending.attempts + 1, err: (err as Error).message }, 'pod network teardown failed again; will retry');
          return;
        }
        this.deps.tables.teardowns.delete(pending.id);
        if (this.deps.tables.sandboxes.get(pending.id)) this.deps.tables.sandboxes.update(pending.id, (r) => { r.networkAttached = false; });
        this.log.info({ sandboxId: pending.id, attempts: pending.attempts + 1 }, 'deferred pod network teardown completed');
      });
    }
  }
}
