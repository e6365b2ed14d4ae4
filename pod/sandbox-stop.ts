// StopPodSandbox: stop the pod's containers, detach it from the network, stop the pause.
// Idempotent: anything already gone (netns, pause, CNI config) counts as stopped.
import { faultPoint } from '../core/faults.js';
import type { Logger } from '../core/log.js';
import { Timeline } from '../core/timeline.js';
import { inParallel } from '../core/undo.js';
import { stopContainerLocked } from './container-stop.js';
import type { PodContext } from './context.js';
import { tearDownNetwork } from './network.js';
import type { SandboxRecord } from './records.js';
import { markSandboxNotReady } from './state.js';

/** Default grace for the containers of a pod being stopped, as containerd uses. */
const POD_STOP_GRACE_SECONDS = 0;

/**
 * Stops the sandbox with that id or unique prefix. One that is gone is stopped already: as the CRI has it,
 * a stop must not fail once everything is reclaimed (kubelet retries it after a removal raced it).
 */
export async function stopSandbox(ctx: PodContext, idOrPrefix: string, log: Logger): Promise<void> {
  const found = ctx.tables.sandboxes.lookup(idOrPrefix);
  if (!found) {
    log.debug({ sandboxId: idOrPrefix }, 'stop of a sandbox that does not exist: nothing to do');
    return;
  }
  await ctx.locks.run(found.id, () => stopSandboxLocked(ctx, found.id, log));
}

/** The stop sequence, also used by removal. The caller holds the sandbox's lock. */
export async function stopSandboxLocked(ctx: PodContext, id: string, log: Logger): Promise<SandboxRecord | undefined> {
  // Looked up under the lock: a Remove that held it before us may have taken the sandbox away.
  const found = ctx.tables.sandboxes.get(id);
  if (!found) return undefined;
  const t = new Timeline();
  const begun = performance.now();
  const containers = ctx.tables.containers.list().filter((c) => c.sandboxId === found.id);
  if (containers.length > 0) {
    await t.step('containers', () =>
      inParallel(containers.map((c) => ctx.locks.run(c.id, () => stopContainerLocked(ctx, c.id, POD_STOP_GRACE_SECONDS, log)))));
  }
  // The pinned netns outlives the pause, and the pause holds its own reference to the pod's shm, so
  // detaching the network, killing the pause and unmounting the shm can all overlap.
  const runtime = ctx.runtimes.get(found.runtimeHandler);
  await inParallel([
    (async () => {
      if (found.networkAttached) {
        await t.step('cni-del', () => tearDownNetwork(ctx, found));
        ctx.tables.sandboxes.update(found.id, (r) => { r.networkAttached = false; });
        faultPoint('sandbox-network-detached');
      }
      if (found.netns) await t.step('netns', () => ctx.host.removeNetns(found.netns!));
    })(),
    runtime && found.state === 'SANDBOX_READY'
      ? t.step('pause-kill', () => runtime.stop(found.id, { timeoutSec: 0, signal: 'SIGKILL' })) : undefined,
    found.shm && t.step('shm', () => ctx.host.unmountShm(found.shm!)),
  ]);
  const record = ctx.tables.sandboxes.update(found.id, markSandboxNotReady);
  t.add({ step: 'total', ms: performance.now() - begun });
  log.info({ ms: t.ms }, 'sandbox stopped');
  return record;
}
