// What the checks inside the VM share: the CRI client on the socket `setup.sh start` made, a registry in the
// guest holding the busybox test image (the guest's own busybox, pulled through minicri), and helpers for pods
// and containers. Each check file starts one, removes every pod it made and stops the registry at the end.
// Runs in the guest only (as root, minicri running under systemd), from `test/vm/vm.test.ts`.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import * as grpc from '@grpc/grpc-js';
import { execa } from 'execa';
import type { ContainerConfig } from '../../../gen/runtime/v1/ContainerConfig.js';
import type { ContainerStatus__Output } from '../../../gen/runtime/v1/ContainerStatus.js';
import type { PodSandboxConfig } from '../../../gen/runtime/v1/PodSandboxConfig.js';
import { pushBusybox } from '../../support/busybox-image.js';
import { CriClient } from '../../support/cri-client.js';
import { containerConfig, podConfig } from '../../support/pods.js';
import { startRegistry, type TestRegistry } from '../../support/registry.js';
import { until as untilValue } from '../../support/wait.js';

export const SOCKET = '/run/minicri/minicri.sock';
/** The network vm.test.ts writes for the guest's pods: bridge mcri-vm0 on 10.238.0.0/24, no gateway, no masquerade. */
export const POD_SUBNET_PREFIX = '10.238.0.';

export interface Pod { id: string; config: PodSandboxConfig }

/** The guest runs emulated: its waits get twice the host's default. */
export const until = <T>(what: string, probe: () => Promise<T | undefined | false>, ms = 60_000): Promise<T> => untilValue(what, probe, ms);

/** A gRPC error with this code, its details matching `details`. */
export function grpcError(code: grpc.status, details?: RegExp) {
  return (err: grpc.ServiceError) => {
    assert.equal(err.code, code, `expected ${grpc.status[code]}, got ${grpc.status[err.code]}: ${err.details}`);
    if (details) assert.match(err.details, details);
    return true;
  };
}

/** Runs `cmd` in the guest (as root), its output as text. */
export async function sh(script: string): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  const r = await execa('sh', ['-c', script], { reject: false });
  return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), stderr: String(r.stderr) };
}

export class GuestEnv {
  private readonly pods: string[] = [];
  private constructor(readonly client: CriClient, private readonly registry: TestRegistry, readonly image: string) {}

  /** The client on minicri's socket, the busybox image pushed to a guest registry and pulled. */
  static async start(tag: string): Promise<GuestEnv> {
    const client = new CriClient(SOCKET);
    const registry = await startRegistry();
    try {
      const image = await pushBusybox(registry, tag);
      await client.image.call('PullImage', { image: { image } }, { timeoutMs: 300_000 });
      return new GuestEnv(client, registry, image);
    } catch (err) {
      client.close();
      await registry.stop();
      throw err;
    }
  }

  async runPod(name: string, change: (c: PodSandboxConfig) => void = () => {}): Promise<Pod> {
    const config = podConfig(name, change);
    const { pod_sandbox_id: id } = await this.client.runtime.call('RunPodSandbox', { config }, { timeoutMs: 180_000 });
    this.pods.push(id);
    return { id, config };
  }

  async create(pod: Pod, name: string, command: string[], change: (c: ContainerConfig) => void = () => {}): Promise<string> {
    const config = containerConfig(name, this.image, command, change);
    return (await this.client.runtime.call('CreateContainer', { pod_sandbox_id: pod.id, config, sandbox_config: pod.config }, { timeoutMs: 180_000 })).container_id;
  }

  /** Create and start. */
  async run(pod: Pod, name: string, command: string[], change?: (c: ContainerConfig) => void): Promise<string> {
    const id = await this.create(pod, name, command, change);
    await this.client.runtime.call('StartContainer', { container_id: id }, { timeoutMs: 180_000 });
    return id;
  }

  async status(id: string): Promise<ContainerStatus__Output> {
    return (await this.client.runtime.call('ContainerStatus', { container_id: id })).status!;
  }

  /** The container's process as the guest sees it (verbose ContainerStatus). */
  async pid(id: string): Promise<number> {
    const info = (await this.client.runtime.call('ContainerStatus', { container_id: id, verbose: true })).info.info ?? '{}';
    const pid = Number((JSON.parse(info) as { pid?: number }).pid);
    assert.ok(pid > 0, `verbose ContainerStatus gives the container's pid: ${info}`);
    return pid;
  }

  async waitExited(id: string, ms = 120_000): Promise<ContainerStatus__Output> {
    return until(`container ${id} exits`, async () => { const s = await this.status(id); return s.state === 'CONTAINER_EXITED' && s; }, ms);
  }

  /** `sh -c script` in the container: stdout, stderr and exit code. */
  async exec(id: string, script: string, timeoutSec = 60): Promise<{ stdout: string; stderr: string; exitCode: number }> {
    const r = await this.client.runtime.call('ExecSync', { container_id: id, cmd: ['sh', '-c', script], timeout: timeoutSec }, { timeoutMs: (timeoutSec + 30) * 1000 });
    return { stdout: r.stdout.toString(), stderr: r.stderr.toString(), exitCode: r.exit_code };
  }

  /** The AppArmor label of the container's process: "<profile> (enforce)" or "unconfined". */
  async apparmorLabel(id: string): Promise<string> {
    return (await readFile(`/proc/${await this.pid(id)}/attr/current`, 'utf8')).replace(/\0/g, '').trim();
  }

  async removePod(id: string): Promise<void> {
    await this.client.runtime.call('StopPodSandbox', { pod_sandbox_id: id }, { timeoutMs: 180_000 });
    await this.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: id }, { timeoutMs: 180_000 });
    const i = this.pods.indexOf(id);
    if (i >= 0) this.pods.splice(i, 1);
  }

  /** Removes the pods it made and stops the registry. */
  async stop(): Promise<void> {
    try {
      for (const id of [...this.pods]) await this.removePod(id);
      await this.client.removalsSettled(120_000);
    } finally {
      this.client.close();
      await this.registry.stop();
    }
  }
}
