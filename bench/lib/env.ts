// The bench environment shared by every target: a temp dir on a fresh filesystem, the reference containerd 2.1.5
// and runc 1.3.6 unpacked into it, the PATH the daemons get, a local registry holding busybox, minicri's pause,
// a ~100 MB image, one of many small files and (when the pulls are run) one of 1 GB, a private CNI bridge network
// (mcri-bench0 on 10.235.0.0/16, no route out), and two secondary ones defined as NetworkAttachmentDefinitions
// (mcri-bench1 and 2 on 10.241 and 10.242.0.0/16).
// `cleanup` removes all of it, plus whatever a crashed target left under the temp dir (mounts, cgroups).
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, rm, rmdir, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, delimiter, join } from 'node:path';
import { execa } from 'execa';
import { PAUSE_BINARY } from '../../pod/pause-image.js';
import { describeCriu, testCriu } from '../../test/support/criu.js';
import { unmountUnder } from '../../test/support/daemon.js';
import { startPodResourcesServer, type FakePod, type PodResourcesServer } from '../../test/support/pod-resources-server.js';
import { mountFreshExt4 } from '../../test/support/loop-fs.js';
import { startRegistry, type TestRegistry } from '../../test/support/registry.js';
import { buildImage, pushImage, type TarEntry } from '../../test/support/test-images.js';
import { DRANET_LINK, writeDranetConfig } from '../dranet.js';
import { pushBigImage, pushHugeImage, pushManyFilesImage, type BigImage } from '../pull.js';
import { unpackReference, type Reference } from './reference.js';

export const BRIDGE = 'mcri-bench0';
export const SUBNET = '10.235.0.0/16';
export const NETWORK = 'mcri-bench';
export const CNI_BIN = '/usr/lib/cni';
/** Debian's runc 1.1.5: minicri-runc115's, and containerd 1.6's. */
export const DEBIAN_RUNC = '/usr/sbin/runc';
/** The secondary networks pods of the multinet bench ask for, each a bridge of its own (namespace minicri-bench). */
export const SECONDARY_NETWORKS = [
  { name: 'mcri-sec1', bridge: 'mcri-bench1', subnet: '10.241.0.0/16' },
  { name: 'mcri-sec2', bridge: 'mcri-bench2', subnet: '10.242.0.0/16' },
] as const;
/** Parent cgroup of every bench pod (cgroupfs driver), for every target. */
export const CGROUP_PARENT = '/minicri-bench';
const CGROUP_ROOT = '/sys/fs/cgroup';
/** Names of the floor's network namespaces (this process's only). */
export const FLOOR_NETNS_PREFIX = `mcb-floor-${process.pid}-`;

export interface BenchEnv {
  base: string;
  /** containerd 2.1.5 and runc 1.3.6, unpacked under `base` and checked. */
  reference: Reference;
  /** PATH of every daemon: the bench's own without `unpigz`, and the directories that had it (replaced). */
  daemonPath: { path: string; replaced: string[] };
  registry: TestRegistry;
  confDir: string;
  ipamDir: string;
  /** The NetworkAttachmentDefinitions of SECONDARY_NETWORKS. */
  networksDir: string;
  /** Where the checkpoint bench writes its archive and restores from (minicri's restore.archive_dir). */
  checkpointDir: string;
  /** The CRIU minicri is given (test/support/criu.ts's choice). */
  criuPath: string;
  busybox: string;
  pause: string;
  big: BigImage;
  /** 5 layers of 2,000 small files each. */
  files: BigImage;
  /** 8 layers of incompressible data, 1 GB; only when `huge` was asked for. */
  huge?: BigImage;
  /** The bridge plugin's configuration as the conflist holds it (the floor runs it by hand). */
  bridgeConf: Record<string, unknown>;
  /** The same for each secondary network, by name. */
  secondaryConfs: Record<string, Record<string, unknown>>;
  /** kubelet's pod-resources API for the dranet bench, and the pods it reports (the bench adds and drops them). */
  podResources: PodResourcesServer;
  podResourcesPods: FakePod[];
  /** The CDI spec dir of the dranet bench's device. */
  cdiDir: string;
  cleanup(): Promise<void>;
}

/** busybox plus a symlink per applet and the shared libraries `ldd` lists: a runnable image layer. */
async function busyboxEntries(): Promise<TarEntry[]> {
  const applets = (await execa('/bin/busybox', ['--list'])).stdout.split('\n').map((s) => s.trim()).filter((s) => s && s !== 'busybox');
  const ldd = await execa('ldd', ['/bin/busybox'], { reject: false });
  const libs = ldd.exitCode !== 0 ? [] : [...ldd.stdout.matchAll(/(\/\S+) \(0x[0-9a-f]+\)/g)].map((m) => m[1]!);
  const dirs = new Set<string>(['bin', 'etc', 'tmp', 'proc', 'sys', 'dev', 'root', 'run']);
  for (const lib of libs) {
    const parts = lib.slice(1).split('/').slice(0, -1);
    for (let i = 1; i <= parts.length; i++) dirs.add(parts.slice(0, i).join('/'));
  }
  return [
    ...[...dirs].sort().map((d): TarEntry => ({ name: `${d}/`, type: 'directory', mode: d === 'tmp' ? 0o1777 : 0o755 })),
    { name: 'bin/busybox', data: await readFile('/bin/busybox'), mode: 0o755 },
    ...applets.map((a): TarEntry => ({ name: `bin/${a}`, type: 'symlink', linkname: 'busybox' })),
    ...await Promise.all(libs.map(async (l): Promise<TarEntry> => ({ name: l.slice(1), data: await readFile(l), mode: 0o755 }))),
    { name: 'etc/passwd', data: 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' },
  ];
}

/**
 * Puts `dir` on a fresh ext4 with a journal, in a sparse file, as a node's /var/lib would be. This VM's root
 * filesystem has no journal, and ext4 without one skips inodes freed in the last minutes when it allocates:
 * where the test suite or an earlier round just deleted thousands of files, each new file cost up to half a
 * millisecond, in /tmp more than elsewhere, so whichever daemon's directory landed there lost the pull.
 */
function freshFilesystem(dir: string, image: string): Promise<void> {
  return mountFreshExt4(dir, image, '20G');
}

export interface EnvOptions {
  /** The directory holding the reference's tarball and README. */
  referenceDir: string;
  /** Whether to build and push the 1 GB image (the pull bench's). */
  huge: boolean;
}

export async function makeBenchEnv(log: (msg: string) => void, opts: EnvOptions): Promise<BenchEnv> {
  const base = await mkdtemp(join(tmpdir(), 'minicri-bench-'));
  const image = join('/var/tmp', `${basename(base)}.ext4`);
  let registry: TestRegistry | undefined;
  const confDir = join(base, 'net.d');
  const ipamDir = join(base, 'ipam');
  const networksDir = join(base, 'networks.d');
  const cdiDir = join(base, 'cdi');
  const podResourcesPods: FakePod[] = [];
  let podResources: PodResourcesServer | undefined;
  const checkpointDir = join(base, 'checkpoints');
  let reference: Reference | undefined;
  const cleanup = async () => {
    try {
      // What an interrupted floor run left: its containers and namespaces.
      if (reference) await removeRuncState(reference.runc, join(base, 'floor', 'runc'));
      for (const ns of await readdir('/var/run/netns').catch(() => [] as string[])) {
        if (ns.startsWith(FLOOR_NETNS_PREFIX)) await execa('ip', ['netns', 'del', ns], { reject: false });
      }
      for (const bridge of [BRIDGE, ...SECONDARY_NETWORKS.map((s) => s.bridge)]) await execa('ip', ['link', 'del', bridge], { reject: false });
      await execa('ip', ['link', 'del', DRANET_LINK], { reject: false });
      await removeCgroups(CGROUP_PARENT);
      await registry?.stop();
      await podResources?.close();
    } finally {
      // The filesystem goes whatever failed above: the loop mount, the dir and the sparse file.
      await unmountUnder(base);
      await rm(base, { recursive: true, force: true });
      await rm(image, { force: true });
    }
  };
  try {
    await freshFilesystem(base, image);
    reference = await unpackReference(opts.referenceDir, join(base, 'containerd-2.1'));
    log(`reference unpacked from ${opts.referenceDir}, sha256 as its README gives them`);
    const path = await daemonPath(join(base, 'path'));
    if (path.replaced.length) log(`daemons' PATH: ${path.replaced.join(', ')} replaced by links without unpigz`);
    registry = await startRegistry();
    const host = registry.host;
    log(`registry at ${registry.url}; pushing busybox, pause, a ~100 MB image and one of many small files`);
    const bb = await buildImage([{ entries: await busyboxEntries() }], { Env: ['PATH=/bin'], Cmd: ['sh'], StopSignal: 'SIGKILL' });
    await pushImage(registry, 'bench/busybox', ['bench'], bb);
    const pause = await buildImage(
      [{ entries: [{ name: 'pause', data: await readFile(PAUSE_BINARY), mode: 0o755 }] }],
      { Entrypoint: ['/pause'], User: '65535:65535', StopSignal: 'SIGINT' },
    );
    await pushImage(registry, 'minicri/pause', ['bench'], pause);
    const big = await pushBigImage(registry);
    const files = await pushManyFilesImage(registry);
    let huge: BigImage | undefined;
    if (opts.huge) {
      log('pushing a 1 GB image of 8 layers');
      huge = await pushHugeImage(registry, base);
    }
    await mkdir(confDir, { recursive: true });
    await mkdir(checkpointDir, { recursive: true });
    const criu = await testCriu();
    log(describeCriu(criu));
    // No gateway and no masquerade: pods reach each other over the bridge and nothing else.
    const bridge = (name: string, subnet: string) => ({ type: 'bridge', bridge: name, isGateway: false, ipMasq: false, ipam: { type: 'host-local', ranges: [[{ subnet }]], dataDir: ipamDir } });
    const bridgeConf = bridge(BRIDGE, SUBNET);
    await writeFile(join(confDir, '10-mcri-bench.conflist'), JSON.stringify({ cniVersion: '1.0.0', name: NETWORK, plugins: [bridgeConf] }));
    const secondaryConfs = Object.fromEntries(SECONDARY_NETWORKS.map((s) => [s.name, bridge(s.bridge, s.subnet)]));
    await mkdir(networksDir, { recursive: true });
    await writeFile(join(networksDir, 'bench.json'), JSON.stringify({
      apiVersion: 'v1',
      kind: 'List',
      items: SECONDARY_NETWORKS.map((s) => ({
        apiVersion: 'k8s.cni.cncf.io/v1', kind: 'NetworkAttachmentDefinition', metadata: { name: s.name, namespace: 'minicri-bench' },
        spec: { config: JSON.stringify({ cniVersion: '1.0.0', name: s.name, ...secondaryConfs[s.name] }) },
      })),
    }));
    await mkdir(cdiDir, { recursive: true });
    await writeDranetConfig(networksDir, cdiDir);
    await execa('ip', ['link', 'add', DRANET_LINK, 'type', 'ifb']);
    podResources = await startPodResourcesServer(podResourcesPods);
    return {
      base, reference, daemonPath: path, registry, confDir, ipamDir, networksDir, checkpointDir, criuPath: criu.path,
      busybox: `${host}/bench/busybox:bench`, pause: `${host}/minicri/pause:bench`, big, files, huge, bridgeConf,
      secondaryConfs, podResources, podResourcesPods, cdiDir, cleanup,
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

/**
 * The PATH the daemons get: the bench's own, where a directory holding `unpigz` is replaced by a directory of
 * links to everything else in it, so no daemon hands gunzip to it (containerd would, minicri does not look).
 * Returns the PATH and the directories it replaced.
 */
export async function daemonPath(linkDir: string, path = process.env.PATH ?? ''): Promise<{ path: string; replaced: string[] }> {
  const replaced: string[] = [];
  const dirs: string[] = [];
  for (const dir of path.split(delimiter).filter(Boolean)) {
    if (!existsSync(join(dir, 'unpigz'))) { dirs.push(dir); continue; }
    const copy = join(linkDir, `${replaced.length}`);
    await mkdir(copy, { recursive: true });
    for (const f of await readdir(dir)) if (f !== 'unpigz') await symlink(join(dir, f), join(copy, f)).catch(() => undefined);
    replaced.push(dir);
    dirs.push(copy);
  }
  return { path: dirs.join(delimiter), replaced };
}

/** Force-deletes every container `runc` knows under `root`. */
export async function removeRuncState(runc: string, root: string): Promise<void> {
  const out = await execa(runc, ['--root', root, 'list', '-q'], { reject: false });
  for (const id of String(out.stdout).split('\n').filter(Boolean)) await execa(runc, ['--root', root, 'delete', '--force', id], { reject: false });
}

/** Removes the cgroup `path` and everything below it in every v1 controller (they must be empty of tasks). */
export async function removeCgroups(path: string): Promise<void> {
  const rmTree = async (dir: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    for (const e of entries) if (e.isDirectory()) await rmTree(join(dir, e.name));
    await rmdir(dir).catch(() => undefined);
  };
  for (const c of await readdir(CGROUP_ROOT).catch(() => [] as string[])) await rmTree(join(CGROUP_ROOT, c, path));
}
