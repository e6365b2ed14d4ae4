// UpdateContainerResources (runc update) and ReopenContainerLog (conmon reopens the log file).
import { FailedPrecondition } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { LinuxContainerResources__Output } from '../gen/runtime/v1/LinuxContainerResources.js';
import { linuxResources } from '../oci/runtime/spec/resources.js';
import { containerNow, runtimeOf } from './container-refresh.js';
import type { PodContext } from './context.js';

export async function updateContainerResources(
  ctx: PodContext,
  idOrPrefix: string,
  linux: LinuxContainerResources__Output | null,
  log: Logger,
): Promise<void> {
  const { id } = ctx.tables.containers.find(idOrPrefix);
  await ctx.locks.run(id, async () => {
    const record = await containerNow(ctx, id);
    if (record.state === 'CONTAINER_EXITED') throw new FailedPrecondition(`container ${id} has exited: its resources cannot be updated`);
    if (linux) {
      await runtimeOf(ctx, record).update(id, linuxResources(linux));
      ctx.tables.containers.update(id, (r) => {
        r.config.linux = { ...(r.config.linux ?? { security_context: null }), resources: linux } as typeof r.config.linux;
      });
    }
    log.info('container resources updated');
  });
}

export async function reopenContainerLog(ctx: PodContext, idOrPrefix: string): Promise<void> {
  const record = await containerNow(ctx, idOrPrefix);
  if (record.state !== 'CONTAINER_RUNNING') {
    throw new FailedPrecondition(`container ${record.id} is not running: its log cannot be reopened`);
  }
  await runtimeOf(ctx, record).reopenLog(record.id);
}
