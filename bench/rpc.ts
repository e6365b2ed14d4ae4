// rpc: each RPC alone, sequential, on one persistent connection: what kubelet's frequent small calls cost.
// The reads run against one pod with one running container; RemoveContainer against a stopped container
// made (untimed) for each sample. The lifecycle bench covers the RPCs that make and stop pods.
import { CriClient } from '../test/support/cri-client.js';
import { withFloorServer } from './lib/floor-server.js';
import { benchContainer, benchPod } from './lib/pods.js';
import { summarize, timed, type Summary } from './lib/stats.js';

export interface RpcResult {
  samples: number;
  errors: string[];
  rpc: Record<string, Summary>;
}

/**
 * Untimed calls before each RPC's samples, so connection, caches and JIT are warm for both targets as under a
 * kubelet that calls them every second (a few calls left the first RPC measured paying for Node's JIT).
 */
const WARMUP = 50;

export const RPC_NAMES = [
  'Version', 'Status', 'ListPodSandbox', 'ListContainers', 'PodSandboxStatus', 'PodSandboxStatus verbose',
  'ContainerStatus', 'ContainerStatus verbose', 'ImageStatus', 'ListImages', 'RemoveContainer',
] as const;

export async function rpcBench(client: CriClient, image: string, logRoot: string, samples: number): Promise<RpcResult> {
  const rt = client.runtime;
  const config = benchPod('rpc', logRoot);
  const errors: string[] = [];
  const into: Record<string, number[]> = {};
  const { pod_sandbox_id: pod } = await rt.call('RunPodSandbox', { config });
  try {
    const container = async () => (await rt.call('CreateContainer', { pod_sandbox_id: pod, config: benchContainer(`c${Math.random().toString(36).slice(2, 8)}`, image), sandbox_config: config })).container_id;
    const running = await container();
    await rt.call('StartContainer', { container_id: running });
    const reads: Record<Exclude<typeof RPC_NAMES[number], 'RemoveContainer'>, () => Promise<unknown>> = {
      Version: () => rt.call('Version', {}),
      Status: () => rt.call('Status', {}),
      ListPodSandbox: () => rt.call('ListPodSandbox', {}),
      ListContainers: () => rt.call('ListContainers', {}),
      PodSandboxStatus: () => rt.call('PodSandboxStatus', { pod_sandbox_id: pod }),
      'PodSandboxStatus verbose': () => rt.call('PodSandboxStatus', { pod_sandbox_id: pod, verbose: true }),
      ContainerStatus: () => rt.call('ContainerStatus', { container_id: running }),
      'ContainerStatus verbose': () => rt.call('ContainerStatus', { container_id: running, verbose: true }),
      ImageStatus: () => client.image.call('ImageStatus', { image: { image } }),
      ListImages: () => client.image.call('ListImages', {}),
    };
    for (const [name, call] of Object.entries(reads)) {
      try {
        for (let i = 0; i < WARMUP; i++) await call();
        for (let i = 0; i < samples; i++) await timed(into, name, call);
      } catch (err) {
        errors.push(`${name}: ${(err as Error).message}`);
      }
    }
    // Each sample needs a container made for it; a removal takes milliseconds, so a few warm-up ones do.
    for (let i = 0; i < 5 + samples; i++) {
      try {
        const id = await container();
        await rt.call('StartContainer', { container_id: id });
        await rt.call('StopContainer', { container_id: id, timeout: '10' });
        const remove = () => rt.call('RemoveContainer', { container_id: id });
        await (i < 5 ? remove() : timed(into, 'RemoveContainer', remove));
      } catch (err) {
        errors.push(`RemoveContainer: ${(err as Error).message}`);
      }
    }
  } finally {
    await rt.call('StopPodSandbox', { pod_sandbox_id: pod }).catch(() => undefined);
    await rt.call('RemovePodSandbox', { pod_sandbox_id: pod }).catch(() => undefined);
  }
  return { samples, errors, rpc: Object.fromEntries(Object.entries(into).map(([k, v]) => [k, summarize(v)])) };
}

/** What a reply to Version costs with no runtime behind it (bench/grpc-floor-server.ts), in each floor kind. */
const FLOOR_KINDS = { Version: 'grpc', 'Version, bare HTTP/2': 'http2' } as const;

/** Version on a bare grpc-js server, and on node:http2 alone, each run with the daemon's node flags: Node's floors. */
export async function grpcFloorBench(samples: number): Promise<RpcResult> {
  const rpc: Record<string, Summary> = {};
  for (const [name, kind] of Object.entries(FLOOR_KINDS)) rpc[name] = await floorServerVersion(kind, samples);
  return { samples, errors: [], rpc };
}

async function floorServerVersion(kind: 'grpc' | 'http2', samples: number): Promise<Summary> {
  const into: Record<string, number[]> = {};
  await withFloorServer(kind, async (client) => {
    const call = () => client.runtime.call('Version', {});
    for (let i = 0; i < WARMUP; i++) await call();
    for (let i = 0; i < samples; i++) await timed(into, 'Version', call);
  });
  return summarize(into.Version!);
}
