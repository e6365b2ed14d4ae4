// The streaming tests' fixture: a test daemon on its own network (podDaemon), a busybox image with a small web
// root (/www) pulled from a local registry, and one running pod the block starts its containers in.
import { after, before } from 'node:test';
import type { ContainerConfig } from '../../gen/runtime/v1/ContainerConfig.js';
import { pushBusybox } from './busybox-image.js';
import { podDaemon, type PodDaemon } from './pod-daemon.js';
import { podConfig } from './pods.js';
import { startRegistry, type TestRegistry } from './registry.js';

export interface StreamingPod extends PodDaemon {
  image: string;
  podId: string;
  /** Creates and starts a container of the pod; its id. */
  start(config: ContainerConfig): Promise<string>;
}

/** Registers the hooks; the returned object is filled in before the block's own `before` hooks run. */
export function streamingPod(n: number, name: string, what: string, extraToml = ''): StreamingPod {
  let registry: TestRegistry | undefined;
  // Registered before podDaemon's hooks, so it runs first: the pod goes while its daemon runs, before the host check.
  after(async () => {
    try {
      if (fixture.podId) await fixture.daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: fixture.podId });
    } finally {
      await registry?.stop();
    }
  });
  const fixture = podDaemon(n, what, { extraToml }) as StreamingPod;
  before(async () => {
    const rt = fixture.daemon.client.runtime;
    registry = await startRegistry();
    fixture.image = await pushBusybox(registry, name, {}, [{
      entries: [{ name: 'www/', type: 'directory' }, { name: 'www/index.html', data: 'hello from the pod\n' }],
    }]);
    await fixture.daemon.client.image.call('PullImage', { image: { image: fixture.image } });
    const config = podConfig(name);
    fixture.podId = (await rt.call('RunPodSandbox', { config })).pod_sandbox_id;
    fixture.start = async (c) => {
      const { container_id: id } = await rt.call('CreateContainer', { pod_sandbox_id: fixture.podId, config: c, sandbox_config: config });
      await rt.call('StartContainer', { container_id: id });
      return id;
    };
  });
  return fixture;
}
