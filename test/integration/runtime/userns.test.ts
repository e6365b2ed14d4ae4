// Pods in their own user namespace (hostUsers: false) through the real daemon and runc: the mappings
// kubelet allocates (and critest's below 65536), a root inside that is an unprivileged id on the host, a
// root filesystem and volumes that show their owners through id-mapped mounts (with the mappings kubelet
// puts on each mount, ext4 and tmpfs sources, image volumes), and bad mappings refused leaving nothing behind.
import assert from 'node:assert/strict';
import { chmod, chown, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { execa } from 'execa';
import type { PodSandboxConfig } from '../../../gen/runtime/v1/PodSandboxConfig.js';
import { APP_UID } from '../../support/busybox-image.js';
import { makeDaemonDirs, removeDirs, runMinicri, TestDaemon, type DaemonDirs } from '../../support/daemon.js';
import { testNetwork } from '../../support/pod-daemon.js';
import { containerConfig, PAUSE_IMAGE, podConfig } from '../../support/pods.js';
import { ContainerEnv } from '../container/env.js';

function grpcCode(code: grpc.status, details?: RegExp) {
  return (err: grpc.ServiceError) => {
    assert.equal(err.code, code, `expected ${grpc.status[code]}, got ${grpc.status[err.code]}: ${err.details}`);
    if (details) assert.match(err.details, details);
    return true;
  };
}

/** The first id of the pod's range on the host, as kubelet would allocate it (a multiple of 65536). */
const HOST_BASE = 65536 * 37;
const RANGE = 65536;

const mapping = (hostId: number, length = RANGE, containerId = 0) => ({ host_id: hostId, container_id: containerId, length });

/** A pod with its own user namespace (the POD mode kubelet sends for hostUsers: false). */
function userns(uids = [mapping(HOST_BASE)], gids = [mapping(HOST_BASE)], mode: 'POD' | 'TARGET' | 'NODE' = 'POD') {
  return (c: PodSandboxConfig) => {
    c.linux!.security_context!.namespace_options = { network: 'POD', pid: 'POD', ipc: 'POD', userns_options: { mode, uids, gids } };
  };
}

/** uid and gid lines of /proc/<pid>/status: real, effective, saved, filesystem. */
async function hostIds(pid: number): Promise<{ uid: number; gid: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return { uid: Number(/^Uid:\s+(\d+)/m.exec(status)![1]), gid: Number(/^Gid:\s+(\d+)/m.exec(status)![1]) };
}

describe('pods in their own user namespace', () => {
  let env: ContainerEnv;
  before(async () => { env = await ContainerEnv.start(117); });
  after(() => env.stop());

  it('runs as root inside and as the mapped id on the host, with root-owned files and writable volumes', async (t) => {
    const volume = await mkdtemp(join(tmpdir(), 'minicri-userns-vol-'));
    t.after(() => rm(volume, { recursive: true, force: true }));
    // As kubelet makes an emptyDir: a directory of the host's root, and a file in it.
    await writeFile(join(volume, 'seeded'), 'from the host\n');
    const pod = await env.runPod(t, 'userns', userns());
    const pause = (await env.rt.runtime.call('PodSandboxStatus', { pod_sandbox_id: pod.id, verbose: true })).info;
    const pausePid = JSON.parse(pause.info ?? '{}').pid as number | undefined;
    assert.ok(pausePid && pausePid > 0, `verbose PodSandboxStatus gives the pause's pid: ${pause.info}`);
    // The pause image's user is 65535:65535: inside the pod's range, at its end.
    assert.deepEqual(await hostIds(pausePid!), { uid: HOST_BASE + 65535, gid: HOST_BASE + 65535 }, 'the pause runs as its user, mapped');

    const id = await env.run(pod, 'shell', ['sleep', '300'], (c) => {
      c.mounts = [{ container_path: '/data', host_path: volume, readonly: false, propagation: 'PROPAGATION_PRIVATE' }];
    });
    const inside = await env.exec(id, [
      'id -u; id -g',
      'cat /proc/self/uid_map | tr -s " " | sed "s/^ //"',
      'stat -c "%u:%g %n" / /bin/busybox /etc/passwd /home/app /data /data/seeded /etc/hosts /etc/resolv.conf /etc/hostname /dev/shm',
      'echo written > /data/new && echo volume-writable',
      'touch /made-in-root && echo root-writable',
      'cat /etc/hostname >/dev/null && grep -q . /etc/resolv.conf && grep -q localhost /etc/hosts && echo pod-files-readable',
      'echo x > /dev/shm/x && echo shm-writable',
      'ls /sys/class/net | grep -q lo && echo sysfs',
      'ls /proc/1/status >/dev/null && echo proc',
    ].join('; '));
    assert.equal(inside.exitCode, 0, inside.stderr);
    const lines = inside.stdout.trim().split('\n');
    assert.deepEqual(lines.slice(0, 3), ['0', '0', `0 ${HOST_BASE} ${RANGE}`]);
    assert.deepEqual(lines.slice(3, 13), [
      '0:0 /', '0:0 /bin/busybox', '0:0 /etc/passwd', `${APP_UID}:${APP_UID} /home/app`, '0:0 /data', '0:0 /data/seeded',
      '0:0 /etc/hosts', '0:0 /etc/resolv.conf', '0:0 /etc/hostname', '0:0 /dev/shm',
    ]);
    assert.deepEqual(lines.slice(13), ['volume-writable', 'root-writable', 'pod-files-readable', 'shm-writable', 'sysfs', 'proc']);

    // The container's process, seen from the host: the pod's root is HOST_BASE.
    const state = await env.rt.runtime.call('ContainerStatus', { container_id: id, verbose: true });
    const containerPid = JSON.parse(state.info.info ?? '{}').pid as number;
    assert.ok(containerPid > 0, `verbose ContainerStatus gives the pid: ${state.info.info}`);
    assert.deepEqual(await hostIds(containerPid), { uid: HOST_BASE, gid: HOST_BASE });
    // What the container wrote to the volume is the host's root's on disk: the mount maps it back.
    const written = await stat(join(volume, 'new'));
    assert.deepEqual([written.uid, written.gid], [0, 0]);
    // Nothing stays mounted in the staging dir once the container runs: the pause's and the container's
    // entries keep only their empty root dir (runc starts each exec there).
    const staging = `${env.dirs.stateDir}-userns`;
    assert.deepEqual((await readFile('/proc/self/mountinfo', 'utf8')).split('\n').filter((l) => l.includes(staging)), []);
    assert.deepEqual((await readdir(staging)).sort(), [id, pod.id].sort());
    for (const entry of [id, pod.id]) assert.deepEqual(await readdir(join(staging, entry)), ['rootfs']);
    const entry = await stat(join(staging, id));
    assert.deepEqual([entry.uid, entry.mode & 0o777], [HOST_BASE, 0o700], 'only the pod\'s root may enter its entry');

    // doctor knows the pod's mappings (held against its pause) and the staging entries.
    const doctor = JSON.parse((await runMinicri(['doctor', '--json', '--config', env.dirs.configPath])).stdout) as { kind: string; object: string; owner?: string; status: string }[];
    const mapped = doctor.find((f) => f.kind === 'userns' && f.owner === pod.id);
    assert.equal(mapped?.status, 'ok', JSON.stringify(mapped));
    assert.equal(mapped?.object, `${pod.id} uids 0:${HOST_BASE}:${RANGE}, gids 0:${HOST_BASE}:${RANGE}`);
    assert.deepEqual(doctor.filter((f) => f.kind === 'userns-staging').map((f) => [f.owner, f.status]).sort(), [[id, 'ok'], [pod.id, 'ok']].sort());

    // A restart keeps the pod as it was: exec still runs inside, as the pod's root.
    await env.restartDaemon();
    const again = await env.exec(id, 'id -u; cat /data/new');
    assert.deepEqual([again.exitCode, again.stdout], [0, '0\nwritten\n'], again.stderr);

    // An image volume is an overlay of id-mapped layers with the pod's mappings: its files show their image owners.
    const image = await env.output(pod, 'image-volume', 'cat /iv/etc/group | head -1; stat -c %u:%g /iv/etc/group /iv/home/app', (c) => {
      c.mounts = [{ container_path: '/iv', image: { image: env.images.root }, readonly: true }];
    });
    assert.deepEqual(image.split('\n'), ['root:x:0:', '0:0', `${APP_UID}:${APP_UID}`]);

    // A mount with propagation cannot be id-mapped privately: refused, and nothing of the creation stays.
    await assert.rejects(env.create(pod, 'propagating', ['true'], (c) => {
      c.mounts = [{ container_path: '/p', host_path: volume, readonly: false, propagation: 'PROPAGATION_HOST_TO_CONTAINER' }];
    }), grpcCode(grpc.status.INVALID_ARGUMENT, /"\/p".*propagation/));
    const containers = (await env.rt.runtime.call('ListContainers', { filter: { pod_sandbox_id: pod.id } })).containers;
    assert.deepEqual(containers.filter((c) => c.metadata?.name === 'propagating'), []);
    assert.deepEqual((await readdir(staging)).sort(), [pod.id, ...containers.map((c) => c.id)].sort(), 'no staging entry of the refused container');
  });

  it('takes the mappings kubelet puts on every mount: on-disk owners show as themselves inside, on ext4 and tmpfs, image volumes too; nothing stays mounted', async (t) => {
    const kubelet = { uidMappings: [mapping(HOST_BASE)], gidMappings: [mapping(HOST_BASE)] };
    // A hostPath on the host's disk: a file of uid 1000 as the container knows it (as kubelet's fsGroup chown
    // leaves files), and one of the host id the pod's 1000 is (which only a plain bind would show as 1000).
    const volume = await mkdtemp(join(tmpdir(), 'minicri-idmap-vol-'));
    t.after(() => rm(volume, { recursive: true, force: true }));
    await chmod(volume, 0o777);
    for (const [name, id] of [['own', APP_UID], ['host-id', HOST_BASE + APP_UID]] as const) {
      await writeFile(join(volume, name), `${name}\n`);
      await chown(join(volume, name), id, id);
    }
    // A tmpfs, as kubelet writes Secrets and service-account tokens: it can be id-mapped from Linux 6.3 on.
    const secrets = await mkdtemp(join(tmpdir(), 'minicri-idmap-tmpfs-'));
    t.after(async () => {
      await execa('umount', [secrets], { reject: false });
      await rm(secrets, { recursive: true, force: true });
    });
    await execa('mount', ['-t', 'tmpfs', '-o', 'size=1m,mode=0755', 'tmpfs', secrets]);
    await mkdir(join(secrets, 'serviceaccount'));
    await writeFile(join(secrets, 'serviceaccount', 'token'), 'a-token\n', { mode: 0o640 });
    await chown(join(secrets, 'serviceaccount', 'token'), 0, APP_UID);

    const pod = await env.runPod(t, 'userns-idmap', userns());
    const id = await env.run(pod, 'kubelet-mounts', ['sleep', '300'], (c) => {
      c.mounts = [
        { container_path: '/data', host_path: volume, readonly: false, propagation: 'PROPAGATION_PRIVATE', ...kubelet },
        { container_path: '/var/run/secrets/kubernetes.io', host_path: secrets, readonly: true, propagation: 'PROPAGATION_PRIVATE', ...kubelet },
        { container_path: '/iv', image: { image: env.images.root }, readonly: true, ...kubelet },
      ];
    });
    const inside = await env.exec(id, [
      'stat -c "%u:%g %n" /data/own /data/host-id /var/run/secrets/kubernetes.io/serviceaccount/token /iv/etc/group /iv/home/app',
      'cat /var/run/secrets/kubernetes.io/serviceaccount/token',
      'touch /data/by-root && chown 1000:1000 /data/by-root && echo chowned',
    ].join('; '));
    assert.equal(inside.exitCode, 0, inside.stderr);
    assert.deepEqual(inside.stdout.trim().split('\n'), [
      `${APP_UID}:${APP_UID} /data/own`,
      // Outside the pod's range once mapped: the overflow id, as for any id the namespace does not map.
      '65534:65534 /data/host-id',
      `0:${APP_UID} /var/run/secrets/kubernetes.io/serviceaccount/token`,
      '0:0 /iv/etc/group',
      `${APP_UID}:${APP_UID} /iv/home/app`,
      'a-token',
      'chowned',
    ]);
    // What the container owns as 1000 is 1000's on disk: the mount maps back.
    const byRoot = await stat(join(volume, 'by-root'));
    assert.deepEqual([byRoot.uid, byRoot.gid], [APP_UID, APP_UID]);
    // Its view of the image is one for the pod's mapping.
    const rootfsDir = join(env.dirs.rootDir, 'images', 'rootfs');
    const views = (await readdir(rootfsDir)).filter((k) => k.startsWith('imgvol-'));
    assert.deepEqual(views.filter((k) => k.endsWith(`-u${HOST_BASE}x${RANGE}-g${HOST_BASE}x${RANGE}`)).length, 1, views.join(' '));

    // A mapping that is not the pod's is refused before anything is made.
    await assert.rejects(env.create(pod, 'other-mapping', ['true'], (c) => {
      c.mounts = [{ container_path: '/data', host_path: volume, readonly: false, propagation: 'PROPAGATION_PRIVATE', uidMappings: [mapping(HOST_BASE + RANGE)], gidMappings: [mapping(HOST_BASE + RANGE)] }];
    }), grpcCode(grpc.status.INVALID_ARGUMENT, new RegExp(`mount "/data" asks for uid mapping 0:${HOST_BASE + RANGE}:${RANGE}, not its pod's 0:${HOST_BASE}:${RANGE}`)));
    const staging = `${env.dirs.stateDir}-userns`;
    assert.deepEqual((await readdir(staging)).sort(), [id, pod.id].sort(), 'no staging entry of the refused container');
    // A source the kernel cannot id-map (ramfs, as tmpfs before Linux 6.3) fails the creation once staging has
    // begun: FAILED_PRECONDITION, and what was staged for it is undone.
    const ramfs = await mkdtemp(join(tmpdir(), 'minicri-idmap-ramfs-'));
    t.after(async () => {
      await execa('umount', [ramfs], { reject: false });
      await rm(ramfs, { recursive: true, force: true });
    });
    await execa('mount', ['-t', 'ramfs', 'ramfs', ramfs]);
    await assert.rejects(env.create(pod, 'ramfs', ['true'], (c) => {
      c.mounts = [{ container_path: '/data', host_path: volume, readonly: false, propagation: 'PROPAGATION_PRIVATE', ...kubelet },
        { container_path: '/ram', host_path: ramfs, readonly: false, propagation: 'PROPAGATION_PRIVATE', ...kubelet }];
    }), grpcCode(grpc.status.FAILED_PRECONDITION, new RegExp(`${ramfs} cannot be id-mapped for a pod in its own user namespace.*idmap: Invalid argument`)));
    assert.deepEqual((await readdir(staging)).sort(), [id, pod.id].sort(), 'the failed creation\'s staging entry is gone');
    assert.deepEqual((await readFile('/proc/self/mountinfo', 'utf8')).split('\n').filter((l) => l.includes(`${ramfs} `) && !l.includes(' - ramfs ')), [], 'nothing is mounted over or from the source but the test\'s own ramfs');
    assert.deepEqual((await env.rt.runtime.call('ListContainers', { filter: { pod_sandbox_id: pod.id } })).containers.map((c) => c.id), [id]);

    // Once the pod is gone, nothing of its mounts is: no staged mount, no image view, nothing over the sources.
    await env.rt.runtime.call('StopPodSandbox', { pod_sandbox_id: pod.id });
    await env.rt.runtime.call('RemovePodSandbox', { pod_sandbox_id: pod.id });
    const deadline = Date.now() + 10_000;
    const left = async () => (await readFile('/proc/self/mountinfo', 'utf8')).split('\n')
      .filter((l) => l.includes(staging) || l.includes(volume) || l.includes(`${secrets}/`) || l.includes(`-u${HOST_BASE}x`));
    while ((await left()).length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(await left(), []);
    assert.deepEqual(await readdir(staging), []);
    assert.deepEqual((await readdir(rootfsDir)).filter((k) => k.endsWith(`-u${HOST_BASE}x${RANGE}-g${HOST_BASE}x${RANGE}`)), []);
  });

  it('runs critest\'s pod mapped onto host ids from 1000 (0:1000:100000), with a warning in the log', async (t) => {
    const low = [mapping(1000, 100000)];
    const pod = await env.runPod(t, 'userns-low-ids', userns(low, low));
    assert.equal(await env.output(pod, 'uid-map', 'cat /proc/self/uid_map | tr -s " " | sed "s/^ //"; id -u; stat -c %u:%g /etc/passwd'), '0 1000 100000\n0\n0:0');
    assert.match(env.daemon.log(), /uid mapping 0:1000:100000 and gid mapping 0:1000:100000 \(container:host:length\) overlaps the host's own ids \(0-65535\)/);
  });

  it('refuses malformed, split and TARGET mappings with a message, and leaves nothing behind', async (t) => {
    const before = (await env.rt.runtime.call('ListPodSandbox', {})).items.length;
    const run = (name: string, change: (c: PodSandboxConfig) => void) => env.runPod(t, name, change);
    await assert.rejects(run('split', userns([mapping(HOST_BASE, 1000), mapping(HOST_BASE + 2000, 1000, 1000)])), grpcCode(grpc.status.INVALID_ARGUMENT, /one contiguous range/));
    await assert.rejects(run('empty', userns([mapping(HOST_BASE, 0)])), grpcCode(grpc.status.INVALID_ARGUMENT, /length must be at least 1/));
    await assert.rejects(run('no-root', userns([mapping(HOST_BASE, RANGE, 1)])), grpcCode(grpc.status.INVALID_ARGUMENT, /container id 0/));
    await assert.rejects(run('target', userns(undefined, undefined, 'TARGET')), grpcCode(grpc.status.UNIMPLEMENTED, /mode TARGET is not supported/));
    await assert.rejects(run('host-net', (c) => { userns()(c); c.linux!.security_context!.namespace_options!.network = 'NODE'; }),
      grpcCode(grpc.status.INVALID_ARGUMENT, /host's network namespace/));
    assert.equal((await env.rt.runtime.call('ListPodSandbox', {})).items.length, before);
    assert.deepEqual(await readdir(`${env.dirs.stateDir}-userns`), []);
  });

  it('keeps NODE mode as it was: the host\'s user namespace', async (t) => {
    const pod = await env.runPod(t, 'userns-node', userns([], [], 'NODE'));
    assert.equal(await env.output(pod, 'ids', 'cat /proc/self/uid_map | tr -s " " | sed "s/^ //"'), '0 0 4294967295');
  });
});

describe('user-namespaced pods and a crash', () => {
  const network = testNetwork(118, 'the user namespace crash tests');

  /**
   * Dies at `point` during `operation`; `whileDown` looks at what the crash left (doctor runs without the daemon);
   * after a restart and kubelet-style convergence nothing is left, `also` (host paths) included.
   */
  async function crashAt(point: string, operation: (daemon: TestDaemon) => Promise<unknown>, whileDown: (dirs: DaemonDirs) => Promise<void> = async () => {}, also: string[] = []): Promise<void> {
    const dirs = makeDaemonDirs('', network.net);
    let daemon = await TestDaemon.start(dirs, { MINICRI_TEST_CRASH_AT: point });
    try {
      await assert.rejects(operation(daemon));
      assert.equal(await daemon.exited, -1, 'the daemon was killed');
      const staging = `${dirs.stateDir}-userns`;
      assert.notDeepEqual(await readdir(staging), [], 'the crash left a staging entry');
      await whileDown(dirs);
      daemon = await TestDaemon.start(dirs);
      for (const item of (await daemon.client.runtime.call('ListPodSandbox', {})).items) {
        await daemon.client.runtime.call('StopPodSandbox', { pod_sandbox_id: item.id });
        await daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: item.id });
      }
      assert.deepEqual(await readdir(staging), [], 'no staging entry');
      const mounted = async () => (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').filter((l) => [dirs.base, ...also].some((p) => l.includes(p)));
      // A removed container's cleanup may finish just after its answer.
      const deadline = Date.now() + 10_000;
      while ((await mounted()).length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      assert.deepEqual(await mounted(), [], 'nothing mounted');
      assert.deepEqual(await readdir(`${dirs.rootDir}/images/rootfs`).catch(() => []), [], 'no root filesystem or image volume view');
    } finally {
      await daemon.stop();
      removeDirs(dirs);
    }
  }
  const pod = (name: string) => podConfig(name, userns());

  it('leaves nothing when the daemon dies with the pause\'s mounts staged', () =>
    crashAt('pause-userns-staged', (daemon) => daemon.client.runtime.call('RunPodSandbox', { config: pod('userns-crash-pause') })));

  it('leaves nothing when the daemon dies with a container\'s mounts staged, kubelet\'s id-mapped volumes and an image volume among them', async (t) => {
    const volume = await mkdtemp(join(tmpdir(), 'minicri-idmap-crash-'));
    t.after(() => rm(volume, { recursive: true, force: true }));
    const kubelet = { uidMappings: [mapping(HOST_BASE)], gidMappings: [mapping(HOST_BASE)] };
    let podId = '';
    await crashAt('container-userns-staged', async (daemon) => {
      const config = pod('userns-crash-ctr');
      const { pod_sandbox_id: id } = await daemon.client.runtime.call('RunPodSandbox', { config });
      podId = id;
      const app = containerConfig('app', PAUSE_IMAGE, ['/pause'], (c) => {
        c.mounts = [
          { container_path: '/data', host_path: volume, readonly: false, propagation: 'PROPAGATION_PRIVATE', ...kubelet },
          { container_path: '/iv', image: { image: PAUSE_IMAGE }, readonly: true, ...kubelet },
        ];
      });
      await daemon.client.runtime.call('CreateContainer', { pod_sandbox_id: id, sandbox_config: config, config: app });
    }, async (dirs) => {
      // What the crash left staged: the root and the volume's id-mapped copy; doctor lists the entry.
      const [containerId, ...others] = (await readdir(`${dirs.stateDir}-userns`)).filter((e) => e !== podId);
      assert.ok(containerId && others.length === 0, 'the container\'s staging entry beside the pod\'s');
      const staged = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').filter((l) => l.includes(`${dirs.stateDir}-userns/${containerId}/`));
      assert.ok(staged.length >= 2, `the root and the volume are staged: ${staged.join('\n')}`);
      const views = (await readdir(`${dirs.rootDir}/images/rootfs`)).filter((k) => k.startsWith('imgvol-'));
      assert.deepEqual(views.map((k) => k.endsWith(`-u${HOST_BASE}x${RANGE}-g${HOST_BASE}x${RANGE}`)), [true], 'the image volume\'s view for the pod\'s mapping');
      const doctor = JSON.parse((await runMinicri(['doctor', '--json', '--config', dirs.configPath])).stdout) as { kind: string; owner?: string }[];
      assert.ok(doctor.some((f) => f.kind === 'userns-staging' && f.owner === containerId), JSON.stringify(doctor.filter((f) => f.kind === 'userns-staging')));
    }, [volume]);
  });
});
