// RuntimeService: RPC name → handler. Each handler is the file in handlers/ named after its RPC.
import type { Edge } from './edge.js';
import { Attach } from './handlers/attach.js';
import { CheckpointContainer } from './handlers/checkpoint-container.js';
import { CheckpointPod } from './handlers/checkpoint-pod.js';
import { ContainerStats } from './handlers/container-stats.js';
import { ContainerStatus } from './handlers/container-status.js';
import { CreateContainer } from './handlers/create-container.js';
import { Exec } from './handlers/exec.js';
import { ExecSync } from './handlers/exec-sync.js';
import { GetContainerEvents } from './handlers/get-container-events.js';
import { ListContainerStats } from './handlers/list-container-stats.js';
import { ListContainers } from './handlers/list-containers.js';
import { ListMetricDescriptors } from './handlers/list-metric-descriptors.js';
import { ListPodSandbox } from './handlers/list-pod-sandbox.js';
import { ListPodSandboxMetrics } from './handlers/list-pod-sandbox-metrics.js';
import { ListPodSandboxStats } from './handlers/list-pod-sandbox-stats.js';
import { PodSandboxStats } from './handlers/pod-sandbox-stats.js';
import { PodSandboxStatus } from './handlers/pod-sandbox-status.js';
import { PortForward } from './handlers/port-forward.js';
import { RemoveContainer } from './handlers/remove-container.js';
import { RemovePodSandbox } from './handlers/remove-pod-sandbox.js';
import { ReopenContainerLog } from './handlers/reopen-container-log.js';
import { RestorePod } from './handlers/restore-pod.js';
import { RunPodSandbox } from './handlers/run-pod-sandbox.js';
import { RuntimeConfig } from './handlers/runtime-config.js';
import { StartContainer } from './handlers/start-container.js';
import { Status } from './handlers/status.js';
import { StopContainer } from './handlers/stop-container.js';
import { StopPodSandbox } from './handlers/stop-pod-sandbox.js';
import { StreamContainers } from './handlers/stream-containers.js';
import { StreamContainerStats } from './handlers/stream-container-stats.js';
import { StreamPodSandboxes } from './handlers/stream-pod-sandboxes.js';
import { StreamPodSandboxMetrics } from './handlers/stream-pod-sandbox-metrics.js';
import { StreamPodSandboxStats } from './handlers/stream-pod-sandbox-stats.js';
import { UpdateContainerResources } from './handlers/update-container-resources.js';
import { UpdatePodSandboxResources } from './handlers/update-pod-sandbox-resources.js';
import { UpdateRuntimeConfig } from './handlers/update-runtime-config.js';
import { Version } from './handlers/version.js';
import type { RuntimeHandlers } from './service.js';

export function runtimeService(edge: Edge): RuntimeHandlers {
  return {
    Attach: Attach(edge),
    CheckpointContainer: CheckpointContainer(edge),
    CheckpointPod: CheckpointPod(edge),
    ContainerStats: ContainerStats(edge),
    ContainerStatus: ContainerStatus(edge),
    CreateContainer: CreateContainer(edge),
    Exec: Exec(edge),
    ExecSync: ExecSync(edge),
    GetContainerEvents: GetContainerEvents(edge),
    ListContainerStats: ListContainerStats(edge),
    ListContainers: ListContainers(edge),
    ListMetricDescriptors: ListMetricDescriptors(edge),
    ListPodSandbox: ListPodSandbox(edge),
    ListPodSandboxMetrics: ListPodSandboxMetrics(edge),
    ListPodSandboxStats: ListPodSandboxStats(edge),
    PodSandboxStats: PodSandboxStats(edge),
    PodSandboxStatus: PodSandboxStatus(edge),
    PortForward: PortForward(edge),
    RemoveContainer: RemoveContainer(edge),
    RemovePodSandbox: RemovePodSandbox(edge),
    ReopenContainerLog: ReopenContainerLog(edge),
    RestorePod: RestorePod(edge),
    RunPodSandbox: RunPodSandbox(edge),
    RuntimeConfig: RuntimeConfig(edge),
    StartContainer: StartContainer(edge),
    Status: Status(edge),
    StopContainer: StopContainer(edge),
    StopPodSandbox: StopPodSandbox(edge),
    StreamContainers: StreamContainers(edge),
    StreamContainerStats: StreamContainerStats(edge),
    StreamPodSandboxes: StreamPodSandboxes(edge),
    StreamPodSandboxMetrics: StreamPodSandboxMetrics(edge),
    StreamPodSandboxStats: StreamPodSandboxStats(edge),
    UpdateContainerResources: UpdateContainerResources(edge),
    UpdatePodSandboxResources: UpdatePodSandboxResources(edge),
    UpdateRuntimeConfig: UpdateRuntimeConfig(edge),
    Version: Version(edge),
  };
}
