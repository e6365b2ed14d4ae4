// Sandboxes as they are now: a ready sandbox whose pause has exited (OOM-killed, killed by hand) is
// NOTREADY, so kubelet makes a new one; found through the pause's exit file, which the exit watcher
// sees without a read.
import type { PodContext } from './context.js';
import type { SandboxRecord } from './records.js';
import { markSandboxNotReady } from './state.js';

/** Whether a record says READY while the pause may have an exit file. */
export function pauseMayHaveExited(ctx: PodContext, r: SandboxRecord): boolean {
  return r.state === 'SANDBOX_READY' && ctx.runtimes.get(r.runtimeHandler)?.exits.mayHaveExited(r.id) === true;
}

export async function refreshSandbox(ctx: PodContext, r: SandboxRecord): Promise<SandboxRecord> {
  if (!pauseMayHaveExited(ctx, r)) return r;
  if (!(await ctx.runtimes.get(r.runtimeHandler)!.exitStatus(r.id)) || !ctx.tables.sandboxes.get(r.id)) return r;
  ctx.log.warn({ sandboxId: r.id }, 'the pause container exited: sandbox is NOTREADY');
  return ctx.tables.sandboxes.update(r.id, markSandboxNotReady);
}

/** The sandbox with that id or unique prefix, refreshed. */
export function sandboxNow(ctx: PodContext, idOrPrefix: string): Promise<SandboxRecord> {
  return refreshSandbox(ctx, ctx.tables.sandboxes.find(idOrPrefix));
}
