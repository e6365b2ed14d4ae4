// StartContainer: `runc start` on a CREATED container; conmon already holds its stdio and log. A container made
// from a checkpoint archive is restored instead, under a conmon of its own (container-restore.ts).
import { FailedPrecondition } from '../core/errors.js';
import { faultPoint } from '../core/faults.js';
import type { Logger } from '../core/log.js';
import { nowNanos } from '../core/time.js';
import { Timeline } from '../core/timeline.js';
import { refreshContainer, runtimeOf } from './container-refresh.js';
import { restoreImages, runRestore } from './container-restore.js';
import type { PodContext } from './context.js';
import { markContainerRunning, markStartFailed } from './state.js';
import type { ContainerRecord } from './records.js';

export async function startContainer(ctx: PodContext, idOrPrefix: string, log: Logger): Promise<void> {
  const { id } = ctx.tables.containers.find(idOrPrefix);
  await ctx.locks.run(id, async () => {
    const record = ctx.tables.containers.find(id);
    if (record.state !== 'CONTAINER_CREATED') {
      throw new FailedPrecondition(`container ${id} is ${record.state}, not CONTAINER_CREATED: only a created container can be started`);
    }
    // Taken before runc start: the process may be done (and its finish time set) by the time start returns.
    const startedAt = nowNanos();
    const t = new Timeline();
    let pid: number | undefined;
    try {
      const runtime = runtimeOf(ctx, record);
      const images = restoreImages(record);
      if (images) {
        pid = await t.step('runc-restore', () => runRestore(runtime, record, images));
        faultPoint('container-restored');
      }
      else await t.step('runc-start', () => runtime.start(id));
      faultPoint('container-started');
    } catch (err) {
      ctx.tables.containers.update(id, (r) => markStartFailed(r, (err as Error).message));
      throw err;
    } finally {
      if (record.restoreTcp) await releaseLoopbackResets(ctx, record);
    }
    const running = ctx.tables.containers.update(id, (r) => {
      const { restoring: _, ...started } = markContainerRunning(r, startedAt);
      return { ...started, ...(pid ? { pid } : {}), timeline: [...r.timeline ?? [], ...t.entries] };
    });
    log.info('container started');
    // An exit the watcher told of before this write found the container not yet running: read it now.
    await refreshContainer(ctx, running);
  });
}

/** The pod's loopback resets let through again once none of its containers waits for its restore (pod-restore.ts held them). */
async function releaseLoopbackResets(ctx: PodContext, restored: ContainerRecord): Promise<void> {
  const waiting = ctx.tables.containers.list().some((c) => c.sandboxId === restored.sandboxId && c.id !== restored.id
    && c.restoreTcp && c.restoring && c.state === 'CONTAINER_CREATED');
  const netns = ctx.tables.sandboxes.get(restored.sandboxId)?.netns;
  if (!waiting && netns) await ctx.host.holdLoopbackResets(netns.path, false);
}
