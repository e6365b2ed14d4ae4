// The pods and containers every benchmark asks for, the same for every target: what kubelet would send.
import type { ContainerConfig } from '../../gen/runtime/v1/ContainerConfig.js';
import type { PodSandboxConfig } from '../../gen/runtime/v1/PodSandboxConfig.js';
import { DEFAULT_MASKED_PATHS, DEFAULT_READONLY_PATHS } from '../../oci/runtime/spec/security.js';
import { CGROUP_PARENT } from './env.js';

/**
 * A long-running container. The bench image's stop signal is SIGKILL, so StopContainer measures the stop itself,
 * with no grace period and no race with the shell installing a trap (PID 1 ignores an unhandled SIGTERM).
 */
export const SLEEPER = ['sleep', '3600'];

let seq = 0;

export function benchPod(prefix: string, logRoot: string): PodSandboxConfig {
  const name = `${prefix}-${process.pid}-${++seq}`;
  return {
    metadata: { name, namespace: 'minicri-bench', uid: `uid-${name}`, attempt: 0 },
    hostname: name.slice(0, 63),
    log_directory: `${logRoot}/${name}`,
    labels: { app: prefix, 'minicri.bench': 'yes' },
    annotations: {},
    linux: { cgroup_parent: CGROUP_PARENT, security_context: { namespace_options: { network: 'POD', pid: 'CONTAINER', ipc: 'POD' } } },
  };
}

export function benchContainer(name: string, image: string): ContainerConfig {
  return {
    metadata: { name, attempt: 0 },
    image: { image },
    command: SLEEPER,
    log_path: `${name}/0.log`,
    labels: { container: name },
    // kubelet's masks, as it sends them (empty lists would ask for an unmasked /proc).
    linux: { resources: {}, security_context: { masked_paths: [...DEFAULT_MASKED_PATHS], readonly_paths: [...DEFAULT_READONLY_PATHS] } },
  };
}
