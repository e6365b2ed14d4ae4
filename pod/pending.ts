// Background retries of teardown that failed: deferred CNI DELs (network.ts), removals of sandboxes
// and containers that failed or were cut off (a runc delete or an unmount that did not succeed, see
// removal.ts), and thaws a CheckpointPod could not do. Neither waits for kubelet to ask again; both survive restarts, being in the store.
import type { Logger } from '../core/log.js';
import { finishContainerCleanupLocked, removeContainerLocked } from './container-remove.js';
import type { PodContext } from './context.js';
import { deferTeardown } from './network.js';
import { retryPodThaw } from './pod-checkpoint.js';
import { attemptRemoval } from './removal.js';
import { removeSandboxLocked } from './sandbox-remove.js';

export class Retrier {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(private readonly ctx: PodContext, private readonly log: Logger, private readonly tickMs = 500) {}

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
    const { teardowns, sandboxes, containers, containerCleanups, podCheckpoints } = this.ctx.tables;
    for (const pending of teardowns.list().filter((t) => t.nextAt <= now)) {
      await this.ctx.locks.run(pending.id, async () => {
        if (!teardowns.get(pending.id)) return;
        try {
          await this.ctx.network.tearDownPod(pending.request);
        } catch (err) {
          deferTeardown(this.ctx, pending.request, err);
          this.log.warn(
            { sandboxId: pending.id, attempts: pending.attempts + 1, err: (err as Error).message },
            'pod network teardown failed again; will retry',
          );
          return;
        }
        teardowns.delete(pending.id);
        if (sandboxes.get(pending.id)) sandboxes.update(pending.id, (r) => { r.networkAttached = false; });
        this.log.info({ sandboxId: pending.id, attempts: pending.attempts + 1 }, 'deferred pod network teardown completed');
      });
    }
    const retry = async (kind: string, id: string, remove: () => Promise<unknown>) => {
      try {
        await this.ctx.locks.run(id, remove);
        this.log.info({ id }, `deferred ${kind} removal completed`);
      } catch (err) {
        this.log.warn({ id, err: (err as Error).message }, `${kind} removal failed again; will retry`);
      }
    };
    for (const c of containers.list().filter((r) => r.removing && r.removing.nextAt <= now)) {
      await retry('container', c.id, () => attemptRemoval(containers, c.id, () => removeContainerLocked(this.ctx, c.id, this.log)));
    }
    for (const c of containerCleanups.list().filter((r) => r.removing.nextAt <= now)) {
      await retry('removed container', c.id, () => finishContainerCleanupLocked(this.ctx, c.id, this.log));
    }
    for (const s of sandboxes.list().filter((r) => r.removing && r.removing.nextAt <= now)) {
      await retry('sandbox', s.id, () => attemptRemoval(sandboxes, s.id, () => removeSandboxLocked(this.ctx, s.id, this.log)));
    }
    for (const c of podCheckpoints.list().filter((r) => r.thawOnly)) {
      try {
        await retryPodThaw(this.ctx, c, this.log);
      } catch (err) {
        this.log.warn({ containerIds: c.containerIds, err: (err as Error).message },
          'thaw after a pod checkpoint failed again; will retry');
      }
    }
  }
}
