// Shared setup of the container tests: a local registry holding the busybox images, a private CNI
// network (bridge with the host as gateway, host-local, portmap; no route out, no masquerade), the
// real daemon on temp dirs with the images pulled through it, and helpers for pods and containers.
// Teardown removes every pod, stops everything it started and checks the host is as it was.
import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { execa } from 'execa';
import type { ContainerConfig } from '../../../gen/runtime/v1/ContainerConfig.js';
import type { ContainerStatus__Output } from '../../../gen/runtime/v1/ContainerStatus.js';
import type { PodSandboxConfig } from '../../../gen/runtime/v1/PodSandboxConfig.js';
import { pushBusyboxImages, type BusyboxImages } from '../../support/busybox-image.js';
import { makeTestNet, type TestNet } from '../../support/cni-env.js';
import { makeDaemonDirs, removeDirs, TestDaemon, type DaemonDirs } from '../../support/daemon.js';
import { checkThenClean, hostSnapshot, networkFixtureObjects, type HostSnapshot } from '../../support/leaks.js';
import { containerConfig, podConfig } from '../../support/pods.js';
import { startRegistry, type TestRegistry } from '../../support/registry.js';
import { sleep } from '../../../core/time.js';

const IP_FORWARD = '/proc/sys/net/ipv4/ip_forward';

export interface Pod {
  id: string;
  config: PodSandboxConfig;
}

export class ContainerEnv {
  private constructor(
    readonly dirs: DaemonDirs,
    readonly net: TestNet,
    readonly registry: TestRegistry,
    readonly images: BusyboxImages,
    public daemon: TestDaemon,
    private readonly snapshot: HostSnapshot,
    private readonly ipForward: string,
  ) {}

  /** Everything up, images pulled. `n` picks the network (10.233.<n>.0/24, bridge mcnt-br<n>); `extraToml` adds to the daemon's config. */
  static async start(n: number, extraToml = ''): Promise<ContainerEnv> {
    const snapshot = await hostSnapshot();
    // The bridge plugin turns on forwarding for a gateway bridge; teardown puts it back.
    const ipForward = (await readFile(IP_FORWARD, 'utf8')).trim();
    const registry = await startRegistry();
    const net = await makeTestNet(n);
    const dirs = makeDaemonDirs(extraToml, net);
    try {
      await writeGatewayNetwork(net);
      const images = await pushBusyboxImages(registry);
      const daemon = await TestDaemon.start(dirs);
      const env = new ContainerEnv(dirs, net, registry, images, daemon, snapshot, ipForward);
      for (const image of Object.values(images)) await env.rt.image.call('PullImage', { image: { image } });
      return env;
    } catch (err) {
      await registry.stop();
      await net.cleanup();
      removeDirs(dirs);
      throw err;
    }
  }

  get rt() {
    return this.daemon.client;
  }

  /** Pod log directories live under the daemon's temp dir, so teardown takes them too. */
  get logRoot(): string {
    return join(this.dirs.base, 'logs');
  }

  /** runc's state directory for the default handler. */
  get runcRoot(): string {
    return this.dirs.runcRoot;
  }

  async runPod(t: TestContext, name: string, change: (c: PodSandboxConfig) => void = () => {}): Promise<Pod> {
    const config = podConfig(name, (c) => { c.log_directory = join(this.logRoot, name); change(c); });
    const { pod_sandbox_id: id } = await this.rt.runtime.call('RunPodSandbox', { config });
    t.after(() => this.rt.runtime.call('RemovePodSandbox', { pod_sandbox_id: id }));
    return { id, config };
  }

  async create(
    pod: Pod, name: string, command: string[], change: (c: ContainerConfig) => void = () => {}, image = this.images.root,
  ): Promise<string> {
    const config = containerConfig(name, image, command, change);
    const r = await this.rt.runtime.call('CreateContainer', { pod_sandbox_id: pod.id, config, sandbox_config: pod.config });
    return r.container_id;
  }

  /** Create and start. */
  async run(pod: Pod, name: string, command: string[], change?: (c: ContainerConfig) => void, image?: string): Promise<string> {
    const id = await this.create(pod, name, command, change, image);
    await this.rt.runtime.call('StartContainer', { container_id: id });
    return id;
  }

  async status(id: string): Promise<ContainerStatus__Output> {
    return (await this.rt.runtime.call('ContainerStatus', { container_id: id })).status!;
  }

  async waitExited(id: string, ms = 15_000): Promise<ContainerStatus__Output> {
    const deadline = Date.now() + ms;
    for (;;) {
      const s = await this.status(id);
      if (s.state === 'CONTAINER_EXITED') return s;
      assert.ok(Date.now() < deadline, `container ${s.metadata?.name} did not exit within ${ms} ms (state ${s.state})`);
      await sleep(50);
    }
  }

  /** Runs `sh -c script` in the container; stdout, stderr and exit code. */
  async exec(id: string, script: string, timeoutSec = 10): Promise<{ stdout: string; stderr: string; exitCode: number }> {
    const r = await this.rt.runtime.call('ExecSync', { container_id: id, cmd: ['sh', '-c', script], timeout: timeoutSec });
    return { stdout: r.stdout.toString(), stderr: r.stderr.toString(), exitCode: r.exit_code };
  }

  /** A one-shot container's stdout (it must exit 0). */
  async output(pod: Pod, name: string, script: string, change?: (c: ContainerConfig) => void, image?: string): Promise<string> {
    const id = await this.run(pod, name, ['sh', '-c', script], change, image);
    const s = await this.waitExited(id);
    const log = await readFile(s.log_path, 'utf8');
    assert.equal(s.exit_code, 0, `container ${name} failed (${s.reason}): ${log}`);
    return log.split('\n').filter((l) => l.includes(' stdout F ')).map((l) => l.slice(l.indexOf(' stdout F ') + 10)).join('\n');
  }

  /** Ids runc still knows under the daemon's runtime root. */
  async runcList(): Promise<string[]> {
    const r = await execa('runc', ['--root', this.runcRoot, 'list', '--format', 'json']);
    return ((JSON.parse(r.stdout) ?? []) as { id: string }[]).map((c) => c.id);
  }

  /** Stops the daemon, runs `whileDown`, starts it again on the same directories. */
  async restartDaemon(whileDown: () => Promise<void> = async () => {}): Promise<void> {
    assert.equal(await this.daemon.stop(), 0, 'the daemon stops cleanly');
    await whileDown();
    this.daemon = await TestDaemon.start(this.dirs);
  }

  async stop(): Promise<void> {
    try {
      const pods = (await this.rt.runtime.call('ListPodSandbox', {})).items;
      for (const p of pods) await this.rt.runtime.call('RemovePodSandbox', { pod_sandbox_id: p.id });
      assert.deepEqual(await this.runcList(), [], 'runc knows no container after every pod is removed');
      // Our own mounts precisely (assertNothingLeft below also sees other test runs on this host).
      const mounts = (await readFile('/proc/self/mounts', 'utf8')).split('\n').filter((l) => l.includes(this.dirs.base));
      assert.deepEqual(mounts, [], 'no rootfs or shm mount is left');
    } finally {
      await this.daemon.stop();
      await this.registry.stop();
      // Checked before the network and the temp dirs go, so their removal hides nothing; removed whatever the check finds.
      await checkThenClean(this.snapshot, 'the container tests', networkFixtureObjects(this.net.bridge), async () => {
        await this.net.cleanup();
        await writeFile(IP_FORWARD, this.ipForward);
        removeDirs(this.dirs);
      });
    }
  }
}

/** bridge with the host as the pods' gateway (so the host routes to them), host-local without routes, portmap. */
async function writeGatewayNetwork(net: TestNet): Promise<void> {
  await mkdir(net.confDir, { recursive: true });
  await writeFile(join(net.confDir, '10-mcnt.conflist'), JSON.stringify({
    cniVersion: '1.0.0',
    name: net.networkName,
    plugins: [
      {
        type: 'bridge', bridge: net.bridge, isGateway: true, ipMasq: false,
        // No routes beyond the pod subnet itself: nothing in a pod reaches past the bridge.
        ipam: { type: 'host-local', ranges: [[{ subnet: net.subnet }]], dataDir: net.dataDir },
      },
      { type: 'portmap', capabilities: { portMappings: true } },
    ],
  }));
}

export { sleep };
