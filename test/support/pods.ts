// CRI request builders for tests: a plausible pod and container as kubelet would send them.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VERSION } from '../../server/daemon.js';
import { DEFAULT_MASKED_PATHS, DEFAULT_READONLY_PATHS } from '../../oci/runtime/spec/security.js';
import { builtinPauseName } from '../../pod/pause-image.js';
import type { ContainerConfig } from '../../gen/runtime/v1/ContainerConfig.js';
import type { PodSandboxConfig } from '../../gen/runtime/v1/PodSandboxConfig.js';

let counter = 0;

/** Pods' log directories live under one temp dir per test process, removed when it exits. */
export const POD_LOG_ROOT = mkdtempSync(join(tmpdir(), 'minicri-test-logs-'));
process.on('exit', () => rmSync(POD_LOG_ROOT, { recursive: true, force: true }));

export function podConfig(name = `pod${++counter}`, change: (c: PodSandboxConfig) => void = () => {}): PodSandboxConfig {
  const config: PodSandboxConfig = {
    metadata: { name, namespace: 'minicri-test', uid: `uid-${name}-${process.pid}`, attempt: 0 },
    hostname: name,
    log_directory: join(POD_LOG_ROOT, name),
    labels: { app: name, 'minicri.test': 'yes' },
    annotations: { 'minicri.test/annotation': name },
    linux: { cgroup_parent: '/minicri-test', security_context: { namespace_options: { network: 'POD', pid: 'CONTAINER', ipc: 'POD' } } },
  };
  change(config);
  return config;
}

export function containerConfig(name: string, image: string, command: string[], change: (c: ContainerConfig) => void = () => {}): ContainerConfig {
  const config: ContainerConfig = {
    metadata: { name, attempt: 0 },
    image: { image },
    command,
    log_path: `${name}/0.log`,
    labels: { container: name },
    // kubelet's /proc and /sys masks, which it sends for every container but a procMount Unmasked one (minicri
    // reads empty lists as no masks).
    linux: { security_context: { masked_paths: [...DEFAULT_MASKED_PATHS], readonly_paths: [...DEFAULT_READONLY_PATHS] } },
  };
  change(config);
  return config;
}

/** The built-in pause image: present in every daemon, so it serves as a container image that needs no registry. */
export const PAUSE_IMAGE = builtinPauseName(VERSION);
