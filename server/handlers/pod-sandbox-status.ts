// PodSandboxStatus: from the record in memory; verbose adds the pause, the netns, the last CNI CHECK, the networks and the config.
import { sandboxNow } from '../../pod/sandbox-refresh.js';
import { sandboxStatus } from '../cri-views.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function PodSandboxStatus(edge: Edge): RuntimeRpc<'PodSandboxStatus'> {
  return async (request) => {
    const record = await sandboxNow(edge.pods, request.pod_sandbox_id);
    const info: Record<string, string> = {};
    if (request.verbose) {
      info.info = JSON.stringify({
        // The last background CNI CHECK and its age: verbose status runs no plugin on the caller's time.
        networkCheck: edge.networkChecks.report(record),
        pid: record.pausePid ?? 0,
        netnsPath: record.netns?.path ?? '',
        netnsLink: record.netns?.symlink ?? '',
        runtimeHandler: record.runtimeHandler,
        pauseImage: record.pauseImage,
        cniResults: record.cniResults,
        // Every attachment (the default network's and secondary ones) as multus writes network-status.
        networkStatus: record.networkStatus ?? [],
        config: record.config,
        // How long each step of RunPodSandbox took: netns, each CNI plugin's ADD, the pause's create and start.
        timeline: record.timeline ?? [],
      });
    }
    return { status: sandboxStatus(record), info, containers_statuses: [], timestamp: '0' };
  };
}
