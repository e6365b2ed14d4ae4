// PodSandboxStatus: from the records in memory, with the pod's containers and the time it was taken (evented
// PLEG reads both); verbose adds the pause, the netns, the last CNI CHECK, the networks, their DRA devices and the config.
import { nowNanos } from '../../core/time.js';
import { sandboxContainers } from '../../pod/lists.js';
import { sandboxNow } from '../../pod/sandbox-refresh.js';
import { containerStatus, sandboxStatus } from '../cri-views.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

export function PodSandboxStatus(edge: Edge): RuntimeRpc<'PodSandboxStatus'> {
  return async (request) => {
    // Taken before the reads: an event of a change made after them is newer than this answer.
    const timestamp = nowNanos();
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
        // Each DRA-backed attachment's device (KEP-4817's AllocatedDeviceStatus), from the pod's device status file.
        deviceStatus: (await edge.pods.network.deviceStatus(record.id))?.devices ?? [],
        config: record.config,
        // How long each step of RunPodSandbox took: netns, each CNI plugin's ADD, the pause's create and start.
        timeline: record.timeline ?? [],
      });
    }
    const containers = await sandboxContainers(edge.pods, record.id);
    return { status: sandboxStatus(record), info, containers_statuses: containers.map((c) => containerStatus(c, edge.images)), timestamp };
  };
}
