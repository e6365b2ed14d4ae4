// StopPodSandbox: stop the pod's containers, detach it from the network, stop the pause.
// Idempotent: anything already gone (netns, pause, CNI config) counts as stopped.
import { removePodNetns } from '../netns/netns.js';
import { unmountPodShm } from '../oci/runtime/pod/files.js';
import { stopContainer } from './container-stop.js';
import { checkpoint } from './checkpoint.js';
import type { Deps } from './deps.js';
import type { SandboxRecord } from './records.js';
import type { RuntimeHandlers } from './runtime-service.js';
import { tearDownNetwork } from './network-teardown.js';
import type { Logger } from './log.js';

/** Default grace for the containers of a pod being stopped, as containerd uses. */
const POD_STOP_GRACE_SECONDS = 0;

/** The stop sequence, also used by RemovePodSandbox. Runs under the sandbox's lock. */
export async function stopSandbox(deps: Deps, id: string, log: Logger): Promise<SandboxRecord> {
  let record = deps.tables.sandboxes.find(id);
  for (const container of deps.tables.containers.list().filter((c) => c.sandboxId === record.id)) {
    await deps.locks.run(container.id, () => stopContainer(deps, container.id, POD_STOP_GRACE_SECONDS, log));
  }
  if (record.networkAttached) {
    await tearDownNetwork(deps, record);
    record = deps.tables.sandboxes.update(record.id, (r) => { r.networkAttached = false; });
    checkpoint('sandbox-network-detached');
  }
  const runtime = deps.runtimes.get(record.runtimeHandler);
  if (runtime && record.state === 'SANDBOX_READY') await runtime.stop(record.id, { timeoutSec: 0, signal: 'SIGKILL' });
  if (record.netns) await removePodNetns(record.netns);
  if (record.shm) await unmountPodShm(record.shm);
  record = deps.tables.sandboxes.update(record.id, (r) => { r.state = 'SANDBOX_NOTREADY'; });
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
