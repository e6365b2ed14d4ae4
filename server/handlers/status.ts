// Status: RuntimeReady and NetworkReady, as kubelet's node-ready check reads them; verbose adds the
// configuration and the work still pending.
import { podCidr, pendingWork, runtimeConditions } from '../../pod/runtime-status.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function Status(edge: Edge): RuntimeRpc<'Status'> {
  const binaries = { runtime: edge.config.runtimes[edge.config.default_runtime]!.path, conmon: edge.config.conmon_path };
  return async (request) => {
    const conditions = await runtimeConditions(edge.pods, binaries);
    const info: Record<string, string> = {};
    if (request.verbose) {
      info.config = JSON.stringify(edge.config);
      const cidr = podCidr(edge.meta);
      if (cidr) info.podCidr = cidr;
      const pending = pendingWork(edge.pods);
      info.pendingTeardowns = JSON.stringify(pending.teardowns);
      info.pendingRemovals = JSON.stringify(pending.removals);
      // The CDI devices containers may ask for, and the spec files that could not be read.
      info.cdi = JSON.stringify(await edge.pods.cdi.inventory());
    }
    return { status: { conditions }, info, runtime_handlers: [] };
  };
}
