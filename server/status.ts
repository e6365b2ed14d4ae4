// Status: whether the runtime and the pod network are ready, as kubelet's node-ready check reads it.
import type { Deps } from '../pod/context.js';
import { resolveExecutable } from '../core/executables.js';
import type { RuntimeHandlers } from './runtime-service.js';

async function runtimeCondition(deps: Deps) {
  const runtime = deps.config.runtimes[deps.config.default_runtime].path;
  const missing = [];
  if (!(await resolveExecutable(runtime))) missing.push(`OCI runtime "${runtime}"`);
  if (!(await resolveExecutable(deps.config.conmon_path))) missing.push(`conmon "${deps.config.conmon_path}"`);
  return missing.length === 0
    ? { type: 'RuntimeReady', status: true, reason: '', message: '' }
    : { type: 'RuntimeReady', status: false, reason: 'RuntimeBinaryMissing', message: `not executable: ${missing.join(', ')}; install it or fix the path in the config` };
}

export function statusHandlers(deps: Deps): RuntimeHandlers {
  return {
    Status: async (request) => {
      const [runtime, network] = await Promise.all([runtimeCondition(deps), deps.cni.status()]);
      const conditions = [runtime, { type: 'NetworkReady', status: network.ready, reason: network.ready ? '' : network.reason, message: network.ready ? '' : network.message }];
      const info: Record<string, string> = {};
      if (request.verbose) {
        info.config = JSON.stringify(deps.config);
        const podCidr = deps.store.getMeta('pod_cidr');
        if (podCidr) info.podCidr = podCidr;
        info.pendingTeardowns = JSON.stringify(deps.tables.teardowns.list().map((t) => ({ sandboxId: t.id, attempts: t.attempts, lastError: t.lastError })));
        const removing = [...deps.tables.sandboxes.list(), ...deps.tables.containers.list()].filter((r) => r.removing);
        info.pendingRemovals = JSON.stringify(removing.map((r) => ({ id: r.id, ...r.removing })));
      }
      return { status: { conditions }, info, runtime_handlers: [] };
    },
  };
}
