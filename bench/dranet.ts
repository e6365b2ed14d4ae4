// dranet: RunPodSandbox of a pod with one secondary network whose device (an ifb link host-device moves into the
// pod) comes from DRA (pod-resources' dynamic_resources, resolved through a CDI spec), against the same pod whose
// network takes the same link as a device-plugin resource; p50 of each. kubelet is the test pod-resources server.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CriClient } from '../test/support/cri-client.js';
import type { FakePod } from '../test/support/pod-resources-server.js';
import { podRunBench } from './lib/pod-runs.js';
import type { Summary } from './lib/stats.js';

export const DRANET_KINDS = ['devicePlugin', 'dra'] as const;
/** The link both networks hand to host-device; made and removed with the bench environment. */
export const DRANET_LINK = 'mcri-bench-dev0';
const RESOURCE = 'example.com/bench-dev';
const DRIVER = 'net.example.com';
const KIND = 'net.example.com/bench';
const NETWORK_OF = { devicePlugin: 'mcri-dp', dra: 'mcri-dra' } as const;

export interface DranetResult {
  errors: string[];
  /** RunPodSandbox by where the network's device comes from. */
  run: Record<string, Summary>;
}

/** The two networks (one per kind) and the CDI spec a DRA driver would write for the link. */
export async function writeDranetConfig(networksDir: string, cdiDir: string): Promise<void> {
  const nad = (name: string, annotations: Record<string, string>) => ({
    apiVersion: 'k8s.cni.cncf.io/v1', kind: 'NetworkAttachmentDefinition', metadata: { name, namespace: 'minicri-bench', annotations },
    spec: { config: JSON.stringify({ cniVersion: '1.0.0', name, type: 'host-device' }) },
  });
  await writeFile(join(networksDir, 'dranet.json'), JSON.stringify({
    apiVersion: 'v1', kind: 'List',
    items: [nad(NETWORK_OF.devicePlugin, { 'k8s.v1.cni.cncf.io/resourceName': RESOURCE }), nad(NETWORK_OF.dra, { 'dra.minicri.io/driver': DRIVER })],
  }));
  await writeFile(join(cdiDir, 'bench-net.json'), JSON.stringify({
    cdiVersion: '1.1.0', kind: KIND, devices: [{ name: 'dev0', containerEdits: { netDevices: [{ hostInterfaceName: DRANET_LINK, name: 'net1' }] } }],
  }));
}

/**
 * `n` timed RunPodSandbox (after one untimed) per kind; stop and remove are not timed. `pods` is what the
 * pod-resources server reports: each pod is added before its run and dropped after.
 */
export async function dranetBench(client: CriClient, logRoot: string, n: number, pods: FakePod[]): Promise<DranetResult> {
  return podRunBench(client, logRoot, 'dranet', n, DRANET_KINDS, (kind) => kind, (config, kind) => {
    config.annotations!['k8s.v1.cni.cncf.io/networks'] = NETWORK_OF[kind];
    const fake: FakePod = {
      namespace: config.metadata!.namespace!, name: config.metadata!.name!,
      devices: kind === 'devicePlugin' ? { [RESOURCE]: [DRANET_LINK] } : {},
      claims: kind === 'dra' ? [{ name: `${config.metadata!.name}-net`, devices: [{ driver: DRIVER, pool: 'bench', device: 'dev0', cdiDevices: [`${KIND}=dev0`] }] }] : [],
    };
    pods.push(fake);
    return () => { pods.splice(pods.indexOf(fake), 1); };
  });
}
