// StopPodSandbox: stop the pod's containers, detach it from the network, stop the pause.
// Idempotent: anything already gone (netns, pause, CNI config) counts as stopped.
import { removePodNetns } from '../netns/netns.js';
import { unmountPodShm } from '../oci/runtime/pod/files.js';
import { stopContainer } from './container-stop.js';
import { faultPoint } from '../core/faults.js';
import type { Deps } from './context.js';
import { inParallel } from '../core/undo.js';
import type { SandboxRecord } from './records.js';
import type { RuntimeHandlers } from '../server/runtime-service.js';
import { tearDownNetwork } from './network.js';
import type { Logger } from '../core/log.js';

/** Default grace for the containers of a pod being stopped, as containerd uses. */
const POD_STOP_GRACE_SECONDS = 0;

/** The stop sequence, also used by RemovePodSandbox. Runs under the sandbox's lock. */
export async function stopSandbox(deps: Deps, id: string, log: Logger): Promise<SandboxRecord | undefined> {
  // Looked up under the lock: a Remove that held it before us may have taken the sandbox away.
  const found = deps.tables.sandboxes.get(id);
  if (!found) return undefined;
  const containers = deps.tables.containers.list().filter((c) => c.sandboxId === found.id);
  await inParallel(containers.map((c) => deps.locks.run(c.id, () => stopContainer(deps, c.id, POD_STOP_GRACE_SECONDS, log))));
  // The pinned netns outlives the pause, and the pause holds its own reference to the pod's shm, so
  // detaching the network, killing the pause and unmounting the shm can all overlap.
  const runtime = deps.runtimes.get(found.runtimeHandler);
  await inParallel([
    (async () => {
      if (found.networkAttached) {
        await tearDownNetwork(deps, found);
        deps.tables.sandboxes.update(found.id, (r) => { r.networkAttached = false; });
        faultPoint('sandbox-network-detached');
      }
      if (found.netns) await removePodNetns(found.netns);
    })(),
    runtime && found.state === 'SANDBOX_READY' ? runtime.stop(found.id, { timeoutSec: 0, signal: 'SIGKILL' }) : undefined,
    found.shm && unmountPodShm(found.shm),
  ]);
  const record = deps.tables.sandboxes.update(found.id, (r) => { r.state = 'SANDBOX_NOTREADY'; });
  log.info('sandbox stopped');
  return record;
}

export function sandboxStopHandlers(deps: Deps): RuntimeHandlers {
  return {
    StopPodSandbox: async (request, ctx) => {
      const id = deps.tables.sandboxes.find(request.pod_sandbox_id).id;
      await deps.locks.run(id, () => stopSandbox(deps, id, ctx.log));
      return {};
    },
  };
}
