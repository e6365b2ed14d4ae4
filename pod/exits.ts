// Exits recorded as they happen: when conmon writes a container's exit file (or the pause's), the exit
// watcher says so and the record becomes EXITED (the sandbox NOTREADY) at once, rather than at the next
// read of it, so its STOPPED event reaches subscribers while kubelet relists rarely (evented PLEG).
import { refreshContainer } from './container-refresh.js';
import type { PodContext } from './context.js';
import { refreshSandbox } from './sandbox-refresh.js';

/** Records each exit the runtimes' exit watchers see from now on. */
export function recordExitsAsTheyHappen(ctx: PodContext): void {
  for (const runtime of new Set(ctx.runtimes.values())) {
    runtime.exits.onExit((id) => {
      // The same refresh a status read does: it reads the exit file once and writes the transition.
      const container = ctx.tables.containers.get(id);
      const sandbox = ctx.tables.sandboxes.get(id);
      const recorded = container ? refreshContainer(ctx, container) : sandbox ? refreshSandbox(ctx, sandbox) : undefined;
      recorded?.catch((err: unknown) =>
        ctx.log.warn({ id, err: (err as Error).message }, 'recording an exit failed; the next read of it records it'));
    });
  }
}
