// Background retries of teardown that failed: deferred CNI DELs (network-teardown.ts) and removals of
// sandboxes and containers that failed or were cut off (a runc delete or an unmount that did not
// succeed). Neither waits for kubelet to ask again; both survive restarts, being in the store.
import { removeContainer } from './container-remove.js';
import type { Deps } from './context.js';
import type { Logger } from '../core/log.js';
import { backoff, deferTeardown } from './network.js';
import type { PendingRemoval } from './records.js';
import { removeSandbox } from './sandbox-remove.js';

/** Runs a removal, recording its failure (with backoff) on the record for the next try. */
export async function attemptRemoval(
  table: { get(id: string): { removing?: PendingRemoval } | undefined; update(id: string, f: (r: { removing?: PendingRemoval }) => void): unknown },
  id: string,
  remove: () => Promise<void>,
): Promise<void> {
  if (!table.get(id)?.removing) table.update(id, (r) => { r.removing = { attempts: 0, nextAt: Date.now() + backoff(1), lastError: '' }; });
  try {
    await remove();
  } catch (err) {
    if (table.get(id)) {
      table.update(id, (r) => {
        const attempts = (r.removing?.attempts ?? 0) + 1;
        r.removing = { attempts, nextAt: Date.now() + backoff(attempts), lastError: (err as Error).message };
      });
    }
    throw err;
  }
}

export class Retrier {
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

  /** One pass over what is due. */
  async tick(): Promise<void> {
    const now = Date.now();
    const { teardowns, sandboxes, containers } = this.deps.tables;
    for (const pending of teardowns.list().filter((t) => t.nextAt <= now)) {
      await this.deps.locks.run(pending.id, async () => {
        if (!teardowns.get(pending.id)) return;
        try {
          await this.deps.cni.tearDownPod(pending.request);
        } catch (err) {
          deferTeardown(this.deps, pending.request, err);
          this.log.warn({ sandboxId: pending.id, attempts: pending.attempts + 1, err: (err as Error).message }, 'pod network teardown failed again; will retry');
          return;
        }
        teardowns.delete(pending.id);
        if (sandboxes.get(pending.id)) sandboxes.update(pending.id, (r) => { r.networkAttached = false; });
        this.log.info({ sandboxId: pending.id, attempts: pending.attempts + 1 }, 'deferred pod network teardown completed');
      });
    }
    const retry = async (kind: string, id: string, remove: () => Promise<void>) => {
      try {
        await this.deps.locks.run(id, remove);
        this.log.info({ id }, `deferred ${kind} removal completed`);
      } catch (err) {
        this.log.warn({ id, err: (err as Error).message }, `${kind} removal failed again; will retry`);
      }
    };
    for (const c of containers.list().filter((r) => r.removing && r.removing.nextAt <= now)) {
      await retry('container', c.id, () => attemptRemoval(containers, c.id, () => removeContainer(this.deps, c.id, this.log)));
    }
    for (const s of sandboxes.list().filter((r) => r.removing && r.removing.nextAt <= now)) {
      await retry('sandbox', s.id, () => attemptRemoval(sandboxes, s.id, () => removeSandbox(this.deps, s.id, this.log)));
    }
  }
}
