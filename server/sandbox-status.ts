// PodSandboxStatus and ListPodSandbox: answered from the records in memory, so relists stay cheap.
import type { Deps } from './deps.js';
import { matchesLabels } from './filters.js';
import type { RuntimeHandlers } from './runtime-service.js';
import { podNetworkRequest, refreshSandbox, sandboxStatus } from './sandbox-common.js';

export function sandboxStatusHandlers(deps: Deps): RuntimeHandlers {
  return {
    PodSandboxStatus: async (request) => {
      const record = await refreshSandbox(deps, deps.tables.sandboxes.find(request.pod_sandbox_id));
      const info: Record<string, string> = {};
      if (request.verbose) {
        // CNI CHECK, where the network's version has it: is the attachment still as ADD made it?
        const networkCheck = record.state === 'SANDBOX_READY' && record.networkAttached
          ? await deps.cni.checkPod(podNetworkRequest(record)).then(() => 'ok', (err: Error) => err.message)
          : 'not attached';
        info.info = JSON.stringify({
          networkCheck,
          pid: record.pausePid ?? 0,
          netnsPath: record.netns?.path ?? '',
          netnsLink: record.netns?.symlink ?? '',
          runtimeHandler: record.runtimeHandler,
          pauseImage: record.pauseImage,
          cniResults: record.cniResults,
          config: record.config,
        });
      }
      return { status: sandboxStatus(record), info, containers_statuses: [], timestamp: '0' };
    },
    ListPodSandbox: async (request) => {
      const filter = request.filter;
      const fresh = await Promise.all(deps.tables.sandboxes.list().map((r) => refreshSandbox(deps, r)));
      const items = fresh.filter((r) =>
        (!filter?.id || r.id.startsWith(filter.id))
        && (!filter?.state || r.state === filter.state.state)
        && matchesLabels(r.config.labels, filter?.label_selector));
      return {
        items: items.map((r) => ({
          id: r.id, metadata: r.config.metadata, state: r.state, created_at: r.createdAt,
          labels: r.config.labels, annotations: r.config.annotations, runtime_handler: r.runtimeHandler,
        })),
      };
    },
  };
}
