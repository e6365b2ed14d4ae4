// RunPodSandbox: pod directory and files, /dev/shm, network namespace, then CNI and the pause container.
// Every step that changes the host pushes its inverse, so a failure leaves nothing behind.
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { hostname as osHostname } from 'node:os';
import { dirname, join } from 'node:path';
import { FailedPrecondition, InvalidArgument } from '../core/errors.js';
import { faultPoint } from '../core/faults.js';
import type { Logger } from '../core/log.js';
import { nowNanos } from '../core/time.js';
import { Timeline } from '../core/timeline.js';
import { inParallel, withUndo } from '../core/undo.js';
import type { PodSandboxConfig__Output } from '../gen/runtime/v1/PodSandboxConfig.js';
import { podNetnsPaths } from '../netns/netns.js';
import { podCgroupParentDir } from '../oci/runtime/cgroups.js';
import { hostsFile, resolvConf, writePodFiles } from '../oci/runtime/pod/files.js';
import {
  buildPauseSpec, defaultMountRoots, hostIdOverlap, HOST_IDS, podNamespaceModes, podRootOnHost, podUserNamespace, splitSysctls, stageUsernsMounts,
  type PodUserns,
} from '../oci/runtime/spec/index.js';
import { usernsStagingEntry } from '../oci/runtime/userns.js';
import type { PodContext } from './context.js';
import { podNetworkRequest, tearDownNetwork } from './network.js';
import { sandboxReservation, type SandboxRecord } from './records.js';
import { refreshSandbox } from './sandbox-refresh.js';
import { readSeccompProfiles } from './seccomp-profile.js';
import { markSandboxReady } from './state.js';
import { checkPodSandboxConfig, runtimeHandlerNamed } from './validation.js';

/** Makes a sandbox for `config` under `runtimeHandler` (empty: the default one); returns its id. */
export async function runSandbox(ctx: PodContext, config: PodSandboxConfig__Output | null, runtimeHandler: string, parentLog: Logger): Promise<string> {
  checkPodSandboxConfig(config);
  const t = new Timeline();
  const begun = performance.now();
  const handler = runtimeHandlerNamed(runtimeHandler, ctx.settings.default_runtime, ctx.runtimes.keys());
  const runtime = ctx.runtimes.get(handler)!;
  const modes = podNamespaceModes(config);
  const userns = podUserNamespace(config);
  if (userns) {
    checkUsernsSupport(ctx, handler);
    checkHostIdOverlap(ctx, `${config.metadata.namespace}/${config.metadata.name}`, userns, parentLog);
  }
  const sysctls = splitSysctls(config.linux?.sysctls ?? {}, modes.ipc === 'NODE', modes.network === 'NODE');
  const cgroupParent = podCgroupParentDir(ctx.settings.cgroup_driver, config.linux?.cgroup_parent ?? '');
  const seccompProfiles = await readSeccompProfiles(config.linux?.security_context ?? undefined);
  // Secondary networks are resolved first: a bad request for them must not cost a namespace and a pause.
  if (modes.network !== 'NODE') ctx.network.checkPodNetworks({ name: config.metadata.name, namespace: config.metadata.namespace, annotations: config.annotations });
  const pause = await t.step('pause-image', () => ctx.pauseImage(parentLog));

  const id = randomBytes(32).toString('hex');
  const log = parentLog.child({ sandboxId: id });
  const record: SandboxRecord = {
    id, state: 'SANDBOX_NOTREADY', creating: true, createdAt: nowNanos(), config, runtimeHandler: handler,
    dir: join(ctx.settings.root_dir, 'sandboxes', id), networkAttached: false, ips: [], cniResults: [],
    pauseImage: { id: pause.id, name: pause.name },
  };
  const { tables, host } = ctx;
  // The reservation lock orders creations of one pod name; the id lock makes a Stop or Remove of
  // the sandbox (listed as soon as its record exists) wait until the creation is done or undone.
  return ctx.locks.run(sandboxReservation(record), () => ctx.locks.run(id, () => withUndo(log, async (undo) => {
    // The record goes first: it reserves the pod's name and tells recovery what may exist.
    tables.sandboxes.put(record);
    undo.pushRecord('sandbox record', () => tables.sandboxes.delete(id));
    // Where its cgroups go is remembered for good: an orphan there is found even once no record is left.
    if (!tables.cgroupParents.get(cgroupParent)) tables.cgroupParents.put({ id: cgroupParent });
    const save = () => tables.sandboxes.put(record);

    const hostNetwork = modes.network === 'NODE';
    // The pod's files, its shm, its network namespace and the pause's root filesystem do not depend on each other.
    const podFiles = async () => {
      await mkdir(record.dir, { recursive: true, mode: 0o700 });
      undo.push('pod directory', () => rm(record.dir, { recursive: true, force: true }));
      const [hostResolv, hostHosts] = await Promise.all([readFile('/etc/resolv.conf', 'utf8').catch(() => ''), readFile('/etc/hosts', 'utf8').catch(() => '')]);
      await writePodFiles(record.dir, {
        hostname: hostNetwork ? osHostname() : config.hostname || config.metadata.name,
        resolvConf: resolvConf(config.dns_config, hostResolv),
        hosts: hostsFile(hostNetwork, hostHosts),
      });
    };
    const podShm = async () => {
      if (modes.ipc === 'NODE') return;
      record.shm = join(ctx.settings.state_dir, 'sandboxes', id, 'shm');
      save();
      undo.push('pod shm', async () => { await host.unmountShm(record.shm!); await rm(dirname(record.shm!), { recursive: true, force: true }); });
      await host.mountShm(record.shm, userns && podRootOnHost(userns));
    };
    const netns = async () => {
      if (hostNetwork) return;
      // Named after the sandbox id, so a pin no record explains still says whose it was.
      record.netns = podNetnsPaths(config.metadata.name, { dir: ctx.settings.netns_dir, hex: id.slice(0, 16) });
      save();
      undo.push('network namespace', () => host.removeNetns(record.netns!));
      // A user-namespaced pod's namespace is made by runc with the pause, owned by the pod's root: pinned once it runs.
      if (userns) return;
      await host.createNetns(config.metadata.name, record.netns);
      faultPoint('netns-created');
      await host.setNetnsSysctls(record.netns.path, sysctls.net);
    };
    const pinPauseNetns = async () => {
      if (!userns || hostNetwork) return;
      await host.pinNetnsOf(record.pausePid!, config.metadata.name, record.netns!);
      faultPoint('netns-created');
      await host.setNetnsSysctls(record.netns!.path, sysctls.net);
    };
    const attachNetwork = async () => {
      if (hostNetwork) return;
      record.networkAttached = true;
      save();
      // A DEL that fails here is deferred: the retrier owns it from then on, so it does not count as a
      // failed undo (which would keep this half-made sandbox's record, visible to kubelet).
      undo.push('CNI attachment', () => tearDownNetwork(ctx, record).catch((err: unknown) =>
        log.warn({ err: (err as Error).message }, 'pod network teardown failed; deferred to the background retry')));
      const status = await t.step('cni', () => ctx.network.setUpPod(podNetworkRequest(record)));
      for (const step of status.steps ?? []) t.add(step);
      record.ips = status.ips;
      record.cniResults = status.results;
      record.networkStatus = status.networkStatus;
      save();
    };
    const pauseRootfs = async () => {
      // The pause never writes its root, so one that already has the mount points is used as it is.
      const rootfs = await ctx.images.prepareRootfs(id, pause.id, { readOnlyWith: defaultMountRoots(), ...(userns ? { idmap: userns } : {}) });
      undo.push('pause rootfs', () => ctx.images.removeRootfs(id));
      faultPoint('pause-rootfs-mounted');
      const facts = await ctx.hostFacts(rootfs.path);
      if (seccompProfiles) facts.seccompProfiles = seccompProfiles;
      return { rootfs, host: facts };
    };
    const startPause = async ({ rootfs, host: facts }: Awaited<ReturnType<typeof pauseRootfs>>) => {
      const spec = buildPauseSpec({
        sandboxId: id, config, image: { name: pause.name, config: pause.config }, rootfs: rootfs.path, rootfsShared: rootfs.readOnly,
        netnsPath: record.netns?.path, shmPath: record.shm, cgroupDriver: ctx.settings.cgroup_driver, host: facts,
      });
      const staging = usernsStagingEntry(ctx.settings.state_dir, id);
      if (userns) {
        // runc, as the pod's root, reaches the root through an id-mapped mount it can enter; /dev/shm is its root's already.
        const staged = stageUsernsMounts(spec, staging, rootfs.idmapped ?? false, new Set(record.shm ? [record.shm] : []));
        undo.push('user namespace staging', () => host.unstageUserns(staging));
        await host.stageUserns(staging, staged, userns);
        faultPoint('pause-userns-staged');
      }
      await writeFile(join(record.dir, 'config.json'), JSON.stringify(spec), { mode: 0o600 });
      undo.push('pause container', () => runtime.delete(id, { force: true, bundle: record.dir }));
      const { pid } = await t.step('pause-create', () => runtime.create({ id, bundle: record.dir, logPath: '/dev/null' }));
      // The pause holds its own copies of the mounts now (runc still starts exec processes in the root dir).
      if (userns) await host.unstageUserns(staging, { keepRoot: true });
      faultPoint('pause-created');
      await t.step('pause-start', () => runtime.start(id));
      faultPoint('pause-started');
      record.pausePid = pid;
    };
    // The pause only needs the namespace to join, not the network in it: CNI ADD runs while
    // the pause is created and started, which takes the plugins off the critical path.
    // The shm mount and the netns go first: each needs a process, and the pause waits for both.
    const shmMounted = t.step('shm', podShm);
    const netnsMade = t.step('netns', netns);
    const pauseStarted = inParallel([shmMounted, netnsMade, t.step('pause-rootfs', pauseRootfs), t.step('pod-files', podFiles)]).then(([, , made]) => startPause(made));
    await inParallel([
      // A user-namespaced pod's network namespace exists once its pause does.
      (userns ? pauseStarted.then(pinPauseNetns) : netnsMade).then(attachNetwork),
      pauseStarted,
    ]);
    markSandboxReady(record);
    t.add({ step: 'total', ms: performance.now() - begun });
    record.timeline = t.entries;
    save();
    // A pause that died before this write was not yet READY when the exit watcher told of it: read it now.
    await refreshSandbox(ctx, record);
    log.info({ name: config.metadata.name, namespace: config.metadata.namespace, ips: record.ips, ms: t.ms }, 'sandbox ready');
    return id;
  })));
}

/** A mapping onto the host's own ids (critest's, not kubelet's) runs with a warning unless the config refuses it. */
function checkHostIdOverlap(ctx: PodContext, pod: string, userns: PodUserns, log: Logger): void {
  const overlap = hostIdOverlap(userns);
  if (!overlap) return;
  if (ctx.settings.userns_refuse_host_id_overlap) {
    throw new InvalidArgument(`${overlap}, which this node refuses (userns_refuse_host_id_overlap = true): map the pod to ids from ${HOST_IDS} up`);
  }
  log.warn({ pod },
    `${overlap}: the pod's ids are those of the host's own users and groups (allowed: userns_refuse_host_id_overlap is false)`);
}

/** A user-namespaced pod needs a handler that supports user namespaces on this node (probed at start). */
export function checkUsernsSupport(ctx: PodContext, handler: string): void {
  const features = ctx.runtimeFeatures?.get(handler);
  if (!features?.userNamespaces) {
    throw new FailedPrecondition(`runtime handler "${handler}" does not support user namespaces on this node${features ? `: ${features.missing.join('; ')}` : ''}: run the pod with hostUsers: true`);
  }
}
