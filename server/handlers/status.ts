// Status: RuntimeReady and NetworkReady, as kubelet's node-ready check reads them; each runtime handler
// with what it supports on this node (probed once at start); verbose adds the configuration, the
// work still pending and whether AppArmor confines containers.
import { apparmorStatus, loadedProfiles } from '../../oci/runtime/apparmor/loader.js';
import { podCidr, pendingWork, runtimeConditions, runtimeHandlers } from '../../pod/runtime-status.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function Status(edge: Edge): RuntimeRpc<'Status'> {
  const binaries = { runtime: edge.config.runtimes[edge.config.default_runtime]!.path, conmon: edge.config.conmon_path };
  // The probe's answer does not change while the daemon runs: encoded once.
  const handlers = runtimeHandlers(edge.config.default_runtime, Object.keys(edge.config.runtimes), edge.pods.runtimeFeatures ?? new Map());
  const runtime_handlers = handlers.map((h) => ({
    name: h.name, features: { recursive_read_only_mounts: h.recursiveReadOnly, user_namespaces: h.userNamespaces },
  }));
  // Strict supplemental groups are implemented for every handler; user namespaces with host network are not.
  const features = { supplemental_groups_policy: true, user_namespaces_host_network: false };
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
      info.runtimeHandlerFeatures = JSON.stringify(Object.fromEntries(handlers.filter((h) => h.name).map((h) => [h.name, h])));
      // The CDI devices containers may ask for, and the spec files that could not be read.
      info.cdi = JSON.stringify(await edge.pods.cdi.inventory());
      // Whether containers are confined: the CRI Status has no field for it.
      info.apparmor = JSON.stringify(apparmorStatus(edge.apparmor, edge.apparmor.enabled ? await loadedProfiles() : new Map()));
    }
    return { status: { conditions }, info, runtime_handlers, features };
  };
}
