// Split image and container filesystems (KEP-4191): the daemon keeps its images on one loop-mounted ext4
// and containers' writable layers (writable_layers_dir) on another. ImageFsInfo names both; what a container
// writes counts on the container filesystem only, what a pull brings on the image filesystem only; a restart,
// doctor and removal find the writable layers where they are. The default layout reports no container
// filesystem (kubelet's "not split").
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, stat, statfs, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { execa } from 'execa';
import type { FilesystemUsage__Output } from '../../../gen/runtime/v1/FilesystemUsage.js';
import type { PodSandboxConfig } from '../../../gen/runtime/v1/PodSandboxConfig.js';
import type { Finding } from '../../../pod/inventory.js';
import { pushBusybox } from '../../support/busybox-image.js';
import { makeDaemonDirs, removeDirs, runMinicri, TestDaemon, unmountUnder, type DaemonDirs } from '../../support/daemon.js';
import { mountFreshExt4 } from '../../support/loop-fs.js';
import { hostCheck } from '../../support/pod-daemon.js';
import { containerConfig, podConfig } from '../../support/pods.js';
import { startRegistry, type TestRegistry } from '../../support/registry.js';
import type { TestLayer } from '../../support/test-images.js';
import { waitFor } from '../../support/wait.js';

const MiB = 1024 * 1024;

hostCheck('the split filesystems test');

const used = (fs: FilesystemUsage__Output | undefined) => ({ bytes: Number(fs!.used_bytes!.value), inodes: Number(fs!.inodes_used!.value) });

/** The bytes free to unprivileged users on the filesystems ImageFsInfo names, as a statfs of each mountpoint tells. */
async function available(info: { image_filesystems: FilesystemUsage__Output[]; container_filesystems: FilesystemUsage__Output[] }) {
  const free = async (fs: FilesystemUsage__Output | undefined) => { const s = await statfs(fs!.fs_id!.mountpoint); return s.bavail * s.bsize; };
  return { images: await free(info.image_filesystems[0]), containers: await free(info.container_filesystems[0]) };
}

/** A host-network pod: no CNI network is needed to run its containers. */
const hostNetworkPod = (name: string): PodSandboxConfig => podConfig(name, (c) => { c.linux!.security_context!.namespace_options!.network = 'NODE'; });

describe('split image and container filesystems', () => {
  let registry: TestRegistry;
  let busybox: string;
  let base: string;
  let layersDir: string;
  let dirs: DaemonDirs;
  let daemon: TestDaemon | undefined;
  const loopFiles: string[] = [];
  let pod: { id: string; config: PodSandboxConfig };
  let container: string;

  const fsInfo = async () => daemon!.client.image.call('ImageFsInfo', {});
  const exec = async (script: string) => {
    const r = await daemon!.client.runtime.call('ExecSync', { container_id: container, cmd: ['sh', '-c', script], timeout: 20 });
    assert.equal(r.exit_code, 0, r.stderr.toString());
    return r.stdout.toString();
  };
  const doctor = async () => {
    // Exit 1 when anything is amiss: on a shared test host that may be another test's cgroup in the shared parent.
    const out = await runMinicri(['doctor', '--json', '--config', dirs.configPath]);
    assert.ok(out.code === 0 || out.code === 1, out.stderr);
    return JSON.parse(out.stdout) as Finding[];
  };

  before(async () => {
    registry = await startRegistry();
    busybox = await pushBusybox(registry, '1');
    base = await mkdtemp(join(tmpdir(), 'minicri-splitfs-'));
    layersDir = join(base, 'containers');
    await mkdir(layersDir);
    // Usage measured afresh on every call: the test compares before and after a write.
    dirs = makeDaemonDirs(`writable_layers_dir = "${layersDir}"\nwritable_layer_usage_max_age_seconds = 0`);
    await mkdir(dirs.rootDir);
    // Sparse files outside the temp dirs the filesystems are mounted in.
    for (const [dir, name] of [[dirs.rootDir, 'images'], [layersDir, 'containers']] as const) {
      const file = join('/var/tmp', `${basename(base)}-${name}.ext4`);
      loopFiles.push(file);
      await mountFreshExt4(dir, file, '256M');
    }
    daemon = await TestDaemon.start(dirs);
    await daemon.client.image.call('PullImage', { image: { image: busybox } });
  });

  after(async () => {
    try {
      // A test that failed while the daemon was down leaves its pods to a daemon started here.
      if (dirs) daemon ??= await TestDaemon.start(dirs);
      if (daemon) {
        for (const p of (await daemon.client.runtime.call('ListPodSandbox', {})).items) await daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: p.id });
        assert.equal(await daemon.stop(), 0);
      }
    } finally {
      // Whatever failed above, the mounts, the loop devices and the files go.
      if (base) await unmountUnder(base);
      if (dirs) await unmountUnder(dirs.base);
      for (const file of loopFiles) {
        for (const line of (await execa('losetup', ['-j', file])).stdout.split('\n').filter(Boolean)) await execa('losetup', ['-d', line.split(':')[0]!]);
        await rm(file, { force: true });
      }
      if (dirs) removeDirs(dirs);
      if (base) await rm(base, { recursive: true, force: true });
      await registry?.stop();
    }
  });

  it('names the image store\'s filesystem and the writable layers\' filesystem', async () => {
    const { image_filesystems: [images, ...moreImages], container_filesystems: [containers, ...moreContainers] } = await fsInfo();
    assert.deepEqual([moreImages, moreContainers], [[], []]);
    assert.ok(images && containers);
    assert.equal(images.fs_id!.mountpoint, join(dirs.rootDir, 'images'));
    assert.equal(containers.fs_id!.mountpoint, layersDir);
    // Each on its own loop device.
    const [imagesDev, layersDev, rootDev] = await Promise.all([images.fs_id!.mountpoint, layersDir, dirs.rootDir].map(async (p) => (await stat(p)).dev));
    assert.equal(imagesDev, rootDev);
    assert.notEqual(imagesDev, layersDev);
    assert.ok(used(images).bytes > 0, 'the pulled image');
    assert.ok(Number(containers.timestamp) > 0);
  });

  it('counts what a container writes on the container filesystem only', async () => {
    pod = { config: hostNetworkPod('splitfs'), id: '' };
    pod.id = (await daemon!.client.runtime.call('RunPodSandbox', { config: pod.config })).pod_sandbox_id;
    container = (await daemon!.client.runtime.call('CreateContainer', {
      pod_sandbox_id: pod.id, config: containerConfig('writer', busybox, ['sleep', '1000']), sandbox_config: pod.config,
    })).container_id;
    await daemon!.client.runtime.call('StartContainer', { container_id: container });
    const before = await fsInfo();
    const availableBefore = await available(before);
    await exec('dd if=/dev/zero of=/data bs=1M count=8 2>/dev/null && mkdir /files && for i in 1 2 3 4 5 6 7 8 9 10; do echo $i > /files/$i; done && sync');
    const after = await fsInfo();
    const grew = { bytes: used(after.container_filesystems[0]).bytes - used(before.container_filesystems[0]).bytes, inodes: used(after.container_filesystems[0]).inodes - used(before.container_filesystems[0]).inodes };
    assert.ok(grew.bytes >= 8 * MiB, `the container filesystem grew by ${grew.bytes} bytes`);
    assert.ok(grew.inodes >= 12, `the container filesystem gained ${grew.inodes} inodes`);
    assert.deepEqual(used(after.image_filesystems[0]), used(before.image_filesystems[0]), 'the image filesystem is untouched');
    // What kubelet's eviction signals see: the free space of the filesystem each mountpoint names
    // (containerfs.available falls, imagefs.available stays but for the daemon's own database writes).
    const availableAfter = await available(after);
    assert.ok(availableBefore.containers - availableAfter.containers >= 8 * MiB, `container filesystem: ${availableBefore.containers} -> ${availableAfter.containers}`);
    assert.ok(availableBefore.images - availableAfter.images < MiB, `image filesystem: ${availableBefore.images} -> ${availableAfter.images}`);
    // The container's writable layer is reported on the container filesystem, where its bytes are.
    const { stats } = await daemon!.client.runtime.call('ContainerStats', { container_id: container });
    assert.equal(stats!.writable_layer!.fs_id!.mountpoint, layersDir);
    assert.ok(Number(stats!.writable_layer!.used_bytes!.value) >= 8 * MiB);
  });

  it('counts what a pull brings on the image filesystem only', async () => {
    // Incompressible, so the blob is as large as the unpacked file.
    const extra: TestLayer = { entries: [{ name: 'blob', data: randomBytes(2 * MiB) }] };
    const bigger = await pushBusybox(registry, 'bigger', {}, [extra]);
    const before = await fsInfo();
    await daemon!.client.image.call('PullImage', { image: { image: bigger } });
    const after = await fsInfo();
    assert.ok(used(after.image_filesystems[0]).bytes - used(before.image_filesystems[0]).bytes >= 2 * MiB);
    assert.ok(used(after.image_filesystems[0]).inodes > used(before.image_filesystems[0]).inodes);
    assert.deepEqual(used(after.container_filesystems[0]), used(before.container_filesystems[0]), 'the container filesystem is untouched');
  });

  it('refuses to start with the writable layers moved away from a container\'s; finds them after a restart, in doctor, and removes them with the container', async () => {
    assert.equal(await daemon!.stop(), 0);
    daemon = undefined;
    const config = await readFile(dirs.configPath, 'utf8');
    try {
      await writeFile(dirs.configPath, config.replace(layersDir, join(base, 'elsewhere')));
      // The pod's pause and the container.
      await assert.rejects(TestDaemon.start(dirs), new RegExp(`writable_layers_dir changed, but 2 container root filesystems are still in ${join(layersDir, 'rootfs')}`));
    } finally {
      await writeFile(dirs.configPath, config);
    }
    daemon = await TestDaemon.start(dirs);
    // The container's files and the image's are both still there: its rootfs and the layers under it were kept.
    assert.equal((await exec('wc -c < /data; cat /bin/busybox > /dev/null && echo image')).split('\n').map((l) => l.trim()).join(' '), `${8 * MiB} image `);
    const rootfs = (await doctor()).filter((f) => f.kind === 'rootfs');
    assert.ok(rootfs.some((f) => f.object === join(layersDir, 'rootfs', container) && f.status === 'ok'), JSON.stringify(rootfs));
    assert.ok(rootfs.every((f) => f.object.startsWith(join(layersDir, 'rootfs'))), JSON.stringify(rootfs));
    const before = used((await fsInfo()).container_filesystems[0]);
    await daemon!.client.runtime.call('StopContainer', { container_id: container, timeout: 0 });
    await daemon!.client.runtime.call('RemoveContainer', { container_id: container });
    await waitFor(async () => used((await fsInfo()).container_filesystems[0]).bytes < before.bytes - 8 * MiB, 10_000, 'the writable layer to go from the container filesystem');
    await assert.rejects(stat(join(layersDir, 'rootfs', container)), /ENOENT/);
    await daemon!.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: pod.id });
  });
});

describe('the default layout', () => {
  it('reports no container filesystem: the writable layers share the image filesystem', async () => {
    const dirs = makeDaemonDirs();
    const daemon = await TestDaemon.start(dirs);
    try {
      const info = await daemon.client.image.call('ImageFsInfo', {});
      assert.equal(info.image_filesystems.length, 1);
      assert.equal(info.image_filesystems[0]!.fs_id!.mountpoint, join(dirs.rootDir, 'images'));
      assert.deepEqual(info.container_filesystems, []);
    } finally {
      assert.equal(await daemon.stop(), 0);
      removeDirs(dirs);
    }
  });
});
