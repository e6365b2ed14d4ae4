// PodSandboxStatus and ListPodSandbox: answered from the records in memory, so relists stay cheap.
import type { Deps } from '../pod/context.js';
import type { PodSandbox } from '../gen/runtime/v1/PodSandbox.js';
import { matchesLabels } from '../pod/filters.js';
import { listedSummaries, type ListEncoder } from './list-encoding.js';
import type { SandboxRecord } from '../pod/records.js';
import type { RuntimeHandlers } from './runtime-service.js';
import { pauseMayHaveExited, podNetworkRequest, refreshSandbox, sandboxStatus } from '../pod/sandbox-refresh.js';

function sandboxSummary(r: SandboxRecord): PodSandbox {
  return {
    id: r.id, metadata: r.config.metadata, state: r.state, created_at: r.createdAt,
    labels: r.config.labels, annotations: r.config.annotations, runtime_handler: r.runtimeHandler,
  };
}

export function sandboxStatusHandlers(deps: Deps, encoder: ListEncoder): RuntimeHandlers {
  // Only a sandbox's state changes what ListPodSandbox says of it.
  const summaries = listedSummaries(deps.tables.sandboxes, sandboxSummary, (r) => r.state, encoder);
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
      const all = deps.tables.sandboxes.list();
      // As ListContainers: no promise per record unless some pause may have exited.
      const fresh = all.some((r) => pauseMayHaveExited(deps, r)) ? await Promise.all(all.map((r) => refreshSandbox(deps, r))) : all;
      const items = fresh.filter((r) =>
        (!filter?.id || r.id.startsWith(filter.id))
        && (!filter?.state || r.state === filter.state.state)
        && matchesLabels(r.config.labels, filter?.label_selector));
      return { items: items.map((r) => summaries.get(r)) };
    },
  };
}
