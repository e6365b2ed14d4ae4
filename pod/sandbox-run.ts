// RunPodSandbox: pod directory and files, /dev/shm, network namespace, then CNI and the pause container.
// Every step that changes the host pushes its inverse, so a failure leaves nothing behind.
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { hostname as osHostname } from 'node:os';
import { dirname, join } from 'node:path';
import { createPodNetns, podNetnsPaths, removePodNetns, setNetnsSysctls } from '../netns/netns.js';
import { buildPauseSpec, defaultMountRoots, splitSysctls } from '../oci/runtime/spec/index.js';
import { hostsFile, mountPodShm, resolvConf, unmountPodShm, writePodFiles } from '../oci/runtime/pod/files.js';
import { faultPoint } from '../core/faults.js';
import type { Deps } from './context.js';
import { tearDownNetwork } from './network.js';
import { InvalidArgument } from '../core/errors.js';
import { nowNanos, sandboxReservation, type SandboxRecord } from './records.js';
import type { RuntimeHandlers } from '../server/runtime-service.js';
import { podNetworkRequest, podNamespaceModes } from './sandbox-refresh.js';
import { inParallel, withUndo } from '../core/undo.js';
import { checkPodSandboxConfig } from './validation.js';

export function sandboxRunHandlers(deps: Deps): RuntimeHandlers {
  return {
    RunPodSandbox: async (request, ctx) => {
      const config = request.config;
      checkPodSandboxConfig(config);
      const handler = request.runtime_handler || deps.config.default_runtime;
      const runtime = deps.runtimes.get(handler);
      if (!runtime) throw new InvalidArgument(`runtime handler "${handler}" is not configured (have: ${[...deps.runtimes.keys()].join(', ')})`);
      const modes = podNamespaceModes(config);
      const sysctls = splitSysctls(config.linux?.sysctls ?? {}, modes.ipc === 'NODE', modes.network === 'NODE');
      const pause = await deps.pauseImage(ctx.log);

      const id = randomBytes(32).toString('hex');
      const log = ctx.log.child({ sandboxId: id });
      const record: SandboxRecord = {
        id, state: 'SANDBOX_NOTREADY', creating: true, createdAt: nowNanos(), config, runtimeHandler: handler,
        dir: join(deps.config.root_dir, 'sandboxes', id), networkAttached: false, ips: [], cniResults: [],
        pauseImage: { id: pause.id, name: pause.name },
      };
      // The reservation lock orders creations of one pod name; the id lock makes a Stop or Remove of
      // the sandbox (listed as soon as its record exists) wait until the creation is done or undone.
      return deps.locks.run(sandboxReservation(record), () => deps.locks.run(id, () => withUndo(log, async (undo) => {
        // The record goes first: it reserves the pod's name and tells recovery what may exist.
        deps.tables.sandboxes.put(record);
        undo.pushRecord('sandbox record', () => deps.tables.sandboxes.delete(id));
        const save = () => deps.tables.sandboxes.put(record);

        const hostNetwork = modes.network === 'NODE';
        // The pod's files, its shm, its network namespace and the pause's root filesystem do not depend on each other.
        const podFiles = async () => {
          await mkdir(record.dir, { recursive: true, mode: 0o711 });
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
          record.shm = join(deps.config.state_dir, 'sandboxes', id, 'shm');
          save();
          undo.push('pod shm', async () => { await unmountPodShm(record.shm!); await rm(dirname(record.shm!), { recursive: true, force: true }); });
          await mountPodShm(record.shm);
        };
        const netns = async () => {
          if (hostNetwork) return;
          // Named after the sandbox id, so a pin no record explains still says whose it was.
          record.netns = podNetnsPaths(config.metadata.name, { dir: deps.config.netns_dir, hex: id.slice(0, 16) });
          save();
          undo.push('network namespace', () => removePodNetns(record.netns!));
          await createPodNetns(config.metadata.name, { paths: record.netns });
          faultPoint('netns-created');
          await setNetnsSysctls(record.netns.path, sysctls.net);
        };
        const attachNetwork = async () => {
          if (hostNetwork) return;
          record.networkAttached = true;
          save();
          // A DEL that fails here is deferred: the retrier owns it from then on, so it does not count as a
          // failed undo (which would keep this half-made sandbox's record, visible to kubelet).
          undo.push('CNI attachment', () => tearDownNetwork(deps, record).catch((err: unknown) =>
            log.warn({ err: (err as Error).message }, 'pod network teardown failed; deferred to the background retry')));
          const status = await deps.cni.setUpPod(podNetworkRequest(record));
          record.ips = status.ips;
          record.cniResults = status.results;
          save();
        };
        const pauseRootfs = async () => {
          // The pause never writes its root, so one that already has the mount points is used as it is.
          const rootfs = await deps.images.prepareRootfs(id, pause.id, { readOnlyWith: defaultMountRoots() });
          undo.push('pause rootfs', () => deps.images.removeRootfs(id));
          faultPoint('pause-rootfs-mounted');
          return { rootfs, host: await deps.hostFacts(rootfs.path) };
        };
        const startPause = async ({ rootfs, host }: Awaited<ReturnType<typeof pauseRootfs>>) => {
          const spec = buildPauseSpec({
            sandboxId: id, config, image: { name: pause.name, config: pause.config }, rootfs: rootfs.path, rootfsShared: rootfs.readOnly,
            netnsPath: record.netns?.path, shmPath: record.shm, cgroupDriver: deps.config.cgroup_driver, host,
          });
          await writeFile(join(record.dir, 'config.json'), JSON.stringify(spec));
          undo.push('pause container', () => runtime.delete(id, { force: true }));
          const { pid } = await runtime.create({ id, bundle: record.dir, logPath: '/dev/null' });
          faultPoint('pause-created');
          await runtime.start(id);
          faultPoint('pause-started');
          record.pausePid = pid;
        };
        // The pause only needs the namespace to join, not the network in it: CNI ADD runs while
        // the pause is created and started, which takes the plugins off the critical path.
        // The shm mount and the netns go first: each needs a process, and the pause waits for both.
        const shmMounted = podShm();
        const netnsMade = netns();
        await inParallel([
          netnsMade.then(attachNetwork),
          inParallel([shmMounted, netnsMade, pauseRootfs(), podFiles()]).then(([, , made]) => startPause(made)),
        ]);
        record.state = 'SANDBOX_READY';
        delete record.creating;
        save();
        log.info({ name: config.metadata.name, namespace: config.metadata.namespace, ips: record.ips }, 'sandbox ready');
        return { pod_sandbox_id: id };
      })));
    },
  };
}
