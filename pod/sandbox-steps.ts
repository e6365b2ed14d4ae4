// The steps of RunPodSandbox, each over one build context: every step that changes the host pushes its
// inverse on the build's undo stack, and every change of the record goes through the table's update.
// sandbox-run.ts decides what runs in parallel and what waits for what.
import { dirname, join } from 'node:path';
import { faultPoint } from '../core/faults.js';
import type { Logger } from '../core/log.js';
import type { Timeline } from '../core/timeline.js';
import type { UndoStack } from '../core/undo.js';
import type { Rootfs } from '../oci/image/snapshot.js';
import { hostsFile, resolvConf } from '../oci/runtime/pod/files.js';
import {
  buildPauseSpec, defaultMountRoots, podRootOnHost, stageUsernsMounts, type HostFacts, type PodUserns,
} from '../oci/runtime/spec/index.js';
import { usernsStagingEntry } from '../oci/runtime/userns.js';
import type { PauseImage, PodContext } from './context.js';
import type { ContainerRuntime } from './interfaces.js';
import { podNetworkRequest, tearDownNetwork } from './network.js';
import type { SandboxRecord } from './records.js';
import { refreshSandbox } from './sandbox-refresh.js';
import { markSandboxReady } from './state.js';

/** What every step of one sandbox's creation reads, all decided before anything is made. */
export interface SandboxBuild {
  ctx: PodContext;
  id: string;
  config: SandboxRecord['config'];
  log: Logger;
  t: Timeline;
  /** When the creation began (performance.now()), for the timeline's total. */
  begun: number;
  undo: UndoStack;
  runtime: ContainerRuntime;
  pause: PauseImage;
  userns: PodUserns | undefined;
  hostNetwork: boolean;
  /** The pod shares the node's IPC namespace, and with it the node's /dev/shm. */
  hostIpc: boolean;
  /** The sysctls set in the pod's network namespace. */
  netSysctls: Record<string, string>;
  cgroupParent: string;
  seccompProfiles: Record<string, string> | undefined;
}

/** The pause's root filesystem and what its spec needs to know of the node. */
export interface PauseRoot {
  rootfs: Rootfs;
  facts: HostFacts;
}

const recordOf = (b: SandboxBuild): SandboxRecord => b.ctx.tables.sandboxes.get(b.id)!;
const save = (b: SandboxBuild, change: Partial<SandboxRecord>): SandboxRecord =>
  b.ctx.tables.sandboxes.update(b.id, (r) => ({ ...r, ...change }));

/** The record goes first: it reserves the pod's name and tells recovery what may exist. */
export function recordSandbox(b: SandboxBuild, record: SandboxRecord): void {
  const { tables } = b.ctx;
  tables.sandboxes.put(record);
  b.undo.pushRecord('sandbox record', () => tables.sandboxes.delete(b.id));
  // Where its cgroups go is remembered for good: an orphan there is found even once no record is left.
  if (!tables.cgroupParents.get(b.cgroupParent)) tables.cgroupParents.put({ id: b.cgroupParent });
}

/** The pod's directory with its hostname, resolv.conf and hosts files. */
export async function writePodFiles(b: SandboxBuild): Promise<void> {
  const { host } = b.ctx;
  const { dir } = recordOf(b);
  await host.makePodDir(dir);
  b.undo.push('pod directory', () => host.removeDir(dir));
  const node = await host.nodeNameFiles();
  await host.writePodFiles(dir, {
    hostname: b.hostNetwork ? node.hostname : b.config.hostname || b.config.metadata.name,
    resolvConf: resolvConf(b.config.dns_config, node.resolvConf),
    hosts: hostsFile(b.hostNetwork, node.hosts),
  });
}

/** The pod's own /dev/shm, unless it shares the node's IPC namespace. */
export async function mountPodShm(b: SandboxBuild): Promise<void> {
  if (b.hostIpc) return;
  const { host } = b.ctx;
  const shm = join(b.ctx.settings.state_dir, 'sandboxes', b.id, 'shm');
  save(b, { shm });
  b.undo.push('pod shm', async () => { await host.unmountShm(shm); await host.removeDir(dirname(shm)); });
  await host.mountShm(shm, b.userns && podRootOnHost(b.userns));
}

/** The pod's network namespace, pinned, unless it uses the node's network. */
export async function makeNetns(b: SandboxBuild): Promise<void> {
  if (b.hostNetwork) return;
  const { host } = b.ctx;
  // Named after the sandbox id, so a pin no record explains still says whose it was.
  const netns = host.netnsPaths(b.config.metadata.name, { dir: b.ctx.settings.netns_dir, hex: b.id.slice(0, 16) });
  save(b, { netns });
  b.undo.push('network namespace', () => host.removeNetns(netns));
  // A user-namespaced pod's namespace is made by runc with the pause, owned by the pod's root: pinned once it runs.
  if (b.userns) return;
  await host.createNetns(b.config.metadata.name, netns);
  faultPoint('netns-created');
  await host.setNetnsSysctls(netns.path, b.netSysctls);
}

/** A user-namespaced pod: pins the network namespace runc made for its pause. */
export async function pinPauseNetns(b: SandboxBuild): Promise<void> {
  if (!b.userns || b.hostNetwork) return;
  const { pausePid, netns } = recordOf(b);
  await b.ctx.host.pinNetnsOf(pausePid!, b.config.metadata.name, netns!);
  faultPoint('netns-created');
  await b.ctx.host.setNetnsSysctls(netns!.path, b.netSysctls);
}

/** CNI ADD in the pod's namespace; the addresses and results go in the record. */
export async function attachNetwork(b: SandboxBuild): Promise<void> {
  if (b.hostNetwork) return;
  const attached = save(b, { networkAttached: true });
  // A DEL that fails here is deferred: the retrier owns it from then on, so it does not count as a
  // failed undo (which would keep this half-made sandbox's record, visible to kubelet).
  b.undo.push('CNI attachment', () => tearDownNetwork(b.ctx, recordOf(b)).catch((err: unknown) =>
    b.log.warn({ err: (err as Error).message }, 'pod network teardown failed; deferred to the background retry')));
  const status = await b.t.step('cni', () => b.ctx.network.setUpPod(podNetworkRequest(attached)));
  for (const step of status.steps ?? []) b.t.add(step);
  save(b, { ips: status.ips, cniResults: status.results, networkStatus: status.networkStatus });
}

/** The pause's root filesystem, and what its spec needs to know of the node. */
export async function preparePauseRoot(b: SandboxBuild): Promise<PauseRoot> {
  const { images } = b.ctx;
  // The pause never writes its root, so one that already has the mount points is used as it is.
  const rootfs = await images.prepareRootfs(b.id, b.pause.id, {
    readOnlyWith: defaultMountRoots(), ...(b.userns ? { idmap: b.userns } : {}),
  });
  b.undo.push('pause rootfs', () => images.removeRootfs(b.id));
  faultPoint('pause-rootfs-mounted');
  const facts = await b.ctx.hostFacts(rootfs.path, b.pause.name);
  if (b.seccompProfiles) facts.seccompProfiles = b.seccompProfiles;
  return { rootfs, facts };
}

/**
 * The pause container, created and started in the pod's namespaces (its shm and netns are in the record by now);
 * `launched` is called once its conmon is started.
 */
export async function startPause(b: SandboxBuild, { rootfs, facts }: PauseRoot, launched?: () => void): Promise<void> {
  const { id, runtime, userns } = b;
  const { host } = b.ctx;
  const record = recordOf(b);
  const spec = buildPauseSpec({
    sandboxId: id, config: b.config, image: { name: b.pause.name, config: b.pause.config },
    rootfs: rootfs.path, rootfsShared: rootfs.readOnly,
    netnsPath: record.netns?.path, shmPath: record.shm, cgroupDriver: b.ctx.settings.cgroup_driver, host: facts,
  });
  const staging = usernsStagingEntry(b.ctx.settings.state_dir, id);
  if (userns) {
    // runc, as the pod's root, reaches the root through an id-mapped mount it can enter; /dev/shm is its root's already.
    const staged = stageUsernsMounts(spec, staging, rootfs.idmapped ?? false, new Set(record.shm ? [record.shm] : []));
    b.undo.push('user namespace staging', () => host.unstageUserns(staging));
    await host.stageUserns(staging, staged, userns);
    faultPoint('pause-userns-staged');
  }
  await host.writeBundleSpec(record.dir, spec);
  b.undo.push('pause container', () => runtime.delete(id, { force: true, bundle: record.dir }));
  const { pid } = await b.t.step('pause-create', () => runtime.create({ id, bundle: record.dir, logPath: '/dev/null', launched }));
  // The pause holds its own copies of the mounts now (runc still starts exec processes in the root dir).
  if (userns) await host.unstageUserns(staging, { keepRoot: true });
  faultPoint('pause-created');
  await b.t.step('pause-start', () => runtime.start(id));
  faultPoint('pause-started');
  save(b, { pausePid: pid });
}

/** Every part is made: the sandbox is READY, with its timeline. */
export async function finishSandbox(b: SandboxBuild): Promise<void> {
  b.t.add({ step: 'total', ms: performance.now() - b.begun });
  const ready = b.ctx.tables.sandboxes.update(b.id, (r) => ({ ...markSandboxReady(r), timeline: b.t.entries }));
  // A pause that died before this write was not yet READY when the exit watcher told of it: read it now.
  await refreshSandbox(b.ctx, ready);
  const { name, namespace } = b.config.metadata;
  b.log.info({ name, namespace, ips: ready.ips, ms: b.t.ms }, 'sandbox ready');
}
