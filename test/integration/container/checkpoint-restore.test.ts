// Restoring containers from checkpoint archives through the real daemon (restore.enabled, archives from a directory
// of the test's own): a counter checkpointed with the real CRIU and restored into a new pod counts on from where it
// stopped, in a new log, with status, exec and stats as any container, and so does one restored in a second
// daemon (its own root and state dirs, another pod subnet), the stand-in for another node; bad archives are clear errors that leave
// nothing; hostile ones (paths out of the root, symlinks, device nodes, a spec.dump asking for more, a huge
// archive) are refused or confined.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { execa } from 'execa';
import { makeTestNet } from '../../support/cni-env.js';
import { describeCriu, testCriu, type TestCriu } from '../../support/criu.js';
import { makeDaemonDirs, removeDirs, TestDaemon } from '../../support/daemon.js';
import { containerConfig, podConfig } from '../../support/pods.js';
import { tarball, type TarEntry } from '../../support/test-images.js';
import { ContainerEnv, sleep, type Pod } from './env.js';

const COUNTER = ['sh', '-c', 'rm /etc/group; i=0; while :; do i=$((i+1)); echo $i; echo $i > /counter; sleep 0.1; done'];
const MAX_ARCHIVE = 64 << 20;

function grpcCode(code: grpc.status, details?: RegExp) {
  return (err: grpc.ServiceError) => {
    assert.equal(err.code, code, `expected ${grpc.status[code]}, got ${grpc.status[err.code]}: ${err.details}`);
    if (details) assert.match(err.details, details);
    return true;
  };
}

type Member = TarEntry;
const tarOf = tarball;

/** The numbers a k8s-file log holds, in order. */
function logged(text: string): number[] {
  return text.split('\n').filter((l) => l.includes(' stdout F ')).map((l) => Number(l.slice(l.indexOf(' stdout F ') + 10)));
}

describe('container restore', () => {
  let env: ContainerEnv;
  let dir: string;
  let archives: string;
  let criu: TestCriu;
  const restoreToml = () => `criu_path = "${criu.path}"\n[restore]\nenabled = true\narchive_dir = "${archives}"\nmax_archive_bytes = ${MAX_ARCHIVE}\n`;
  before(async () => {
    criu = await testCriu();
    dir = await mkdtemp(join(tmpdir(), 'minicri-restore-'));
    archives = join(dir, 'checkpoints');
    await mkdir(archives);
    env = await ContainerEnv.start(139, restoreToml());
  });
  after(async () => {
    try {
      await env.stop();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  const call = <M extends 'CreateContainer' | 'StartContainer' | 'CheckpointContainer'>(m: M, r: Parameters<typeof env.rt.runtime.call<M>>[1]) => env.rt.runtime.call(m, r);
  const containerDirs = () => readdir(join(env.dirs.rootDir, 'containers')).catch(() => [] as string[]);
  async function counted(id: string): Promise<number[]> {
    return logged(await readFile((await env.status(id)).log_path, 'utf8').catch(() => ''));
  }
  async function startCounter(pod: Pod): Promise<string> {
    const id = await env.run(pod, 'counter', COUNTER);
    for (const deadline = Date.now() + 10_000; (await counted(id)).length < 5;) {
      assert.ok(Date.now() < deadline, 'the counter counts');
      await sleep(100);
    }
    return id;
  }
  /** A config.dump naming the test's base image and the test pods' namespace, and stand-in images. */
  const base = (): Member[] => [
    { name: 'config.dump', data: JSON.stringify({ id: 'x', name: 'counter', rootfsImage: env.images.root, rootfsImageRef: '', podNamespace: 'minicri-test' }) },
    { name: 'checkpoint' },
    { name: 'checkpoint/inventory.img', data: 'not an image' },
  ];
  async function archive(name: string, members: Member[]): Promise<string> {
    const path = join(archives, name);
    await writeFile(path, await tarOf(members), { mode: 0o600 });
    return path;
  }
  /** CreateContainer from `image` in `pod` fails with `code`, and nothing of it is left. */
  async function refused(pod: Pod, image: string, code: grpc.status, details: RegExp): Promise<void> {
    const dirs = await containerDirs();
    await assert.rejects(env.create(pod, 'restored', [], undefined, image), grpcCode(code, details));
    assert.deepEqual((await env.rt.runtime.call('ListContainers', { filter: { pod_sandbox_id: pod.id } })).containers, []);
    assert.deepEqual(await containerDirs(), dirs, 'no container dir is left');
    const mounts = (await readFile('/proc/self/mounts', 'utf8')).split('\n').filter((l) => l.includes(env.dirs.base) && l.includes('rootfs'));
    assert.deepEqual(mounts.filter((l) => !l.includes('pause')), [], 'no rootfs mount is left');
  }

  it('restores a checkpointed counter into a new pod: CREATED with nothing run, then it counts on from where it stopped', async (t) => {
    t.diagnostic(describeCriu(criu));
    assert.ok(criu.works, `a restore needs a CRIU that passes \`criu check\`: ${describeCriu(criu)} (build one with ../shared/criu/build.sh)`);
    const source = await env.runPod(t, 'rstsource');
    const id = await startCounter(source);
    const location = join(archives, 'counter.tar');
    await call('CheckpointContainer', { container_id: id, location, timeout: 60 });
    await env.rt.runtime.call('StopPodSandbox', { pod_sandbox_id: source.id });
    const before = await counted(id);
    await env.rt.runtime.call('RemovePodSandbox', { pod_sandbox_id: source.id });

    const target = await env.runPod(t, 'rsttarget');
    const restored = await env.create(target, 'counter', [], undefined, location);
    const created = await env.status(restored);
    assert.equal(created.state, 'CONTAINER_CREATED');
    assert.ok(!(await env.runcList()).includes(restored), 'nothing runs before StartContainer');
    assert.ok(existsSync(join(env.dirs.rootDir, 'containers', restored, 'restore', 'checkpoint', 'inventory.img')));

    await call('StartContainer', { container_id: restored });
    assert.equal((await env.status(restored)).state, 'CONTAINER_RUNNING');
    let after: number[] = [];
    for (const deadline = Date.now() + 10_000; (after = await counted(restored)).length < 3;) {
      assert.ok(Date.now() < deadline, 'the restored counter writes to its new log');
      await sleep(100);
    }
    // The shell's own count goes on: its first line in the new log follows the old log's last, no restart at 1.
    assert.ok(after[0]! > 5, `the restored counter starts at ${after[0]}, not again at 1`);
    assert.ok(after[0]! <= before.at(-1)! + 1, `restored at ${after[0]}, the old log ended at ${before.at(-1)}`);
    for (let i = 1; i < after.length; i++) assert.equal(after[i], after[i - 1]! + 1, `counts on by one: ${after.join(' ')}`);
    // Its files as it left them: the counter file it wrote, the image's /etc/group it deleted.
    const exec = await env.exec(restored, 'cat /counter; test -e /etc/group && echo group-is-back');
    assert.ok(Number(exec.stdout.split('\n')[0]) >= after[0]!, exec.stdout);
    assert.ok(!exec.stdout.includes('group-is-back'), 'deleted.files applied');
    const stats = (await env.rt.runtime.call('ContainerStats', { container_id: restored })).stats;
    assert.ok(Number(stats?.memory?.working_set_bytes?.value ?? 0) > 0, 'stats as for any container');
    assert.ok(!existsSync(join(env.dirs.rootDir, 'containers', restored, 'restore')), 'the images go once restored');
  });

  it('a checkpoint from one daemon restores in a second daemon on another subnet once the first pod is gone', async (t) => {
    t.diagnostic(describeCriu(criu));
    assert.ok(criu.works, `a restore needs a CRIU that passes \`criu check\`: ${describeCriu(criu)}`);
    const net = await makeTestNet(140);
    await net.writeBridgeConf();
    const dirs = makeDaemonDirs(restoreToml(), net);
    const second = await TestDaemon.start(dirs);
    t.after(async () => {
      try {
        for (const p of (await second.client.runtime.call('ListPodSandbox', {})).items) {
          await second.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: p.id });
        }
      } finally {
        await second.stop();
        await net.cleanup();
        removeDirs(dirs);
      }
    });
    // The second node holds the base image, pulled by digest.
    const digest = (await env.rt.image.call('ImageStatus', { image: { image: env.images.root } })).image!.repo_digests[0]!;
    await second.client.image.call('PullImage', { image: { image: digest } });

    const source = await env.runPod(t, 'migsource');
    const sourceIp = (await env.rt.runtime.call('PodSandboxStatus', { pod_sandbox_id: source.id })).status!.network!.ip;
    const id = await startCounter(source);
    const location = join(archives, 'migrate.tar');
    await call('CheckpointContainer', { container_id: id, location, timeout: 60 });
    await env.rt.runtime.call('StopPodSandbox', { pod_sandbox_id: source.id });
    const before = await counted(id);
    await env.rt.runtime.call('RemovePodSandbox', { pod_sandbox_id: source.id });

    const config = podConfig('migtarget', (c) => { c.log_directory = join(dirs.base, 'logs', 'migtarget'); });
    const { pod_sandbox_id: podId } = await second.client.runtime.call('RunPodSandbox', { config });
    const targetIp = (await second.client.runtime.call('PodSandboxStatus', { pod_sandbox_id: podId })).status!.network!.ip;
    assert.ok(sourceIp.startsWith('10.233.139.') && targetIp.startsWith('10.233.140.'), `${sourceIp} -> ${targetIp}: a new address on the new subnet`);
    const created = await second.client.runtime.call('CreateContainer', {
      pod_sandbox_id: podId, config: containerConfig('counter', location, []), sandbox_config: config,
    });
    await second.client.runtime.call('StartContainer', { container_id: created.container_id });
    const status = async () => (await second.client.runtime.call('ContainerStatus', { container_id: created.container_id })).status!;
    assert.equal((await status()).state, 'CONTAINER_RUNNING');
    let after: number[] = [];
    for (const deadline = Date.now() + 10_000; (after = logged(await readFile((await status()).log_path, 'utf8').catch(() => ''))).length < 3;) {
      assert.ok(Date.now() < deadline, 'the counter restored in the second daemon writes to its log');
      await sleep(100);
    }
    assert.ok(after[0]! > 5 && after[0]! <= before.at(-1)! + 1, `restored at ${after[0]}, the old log ended at ${before.at(-1)}`);
    for (let i = 1; i < after.length; i++) assert.equal(after[i], after[i - 1]! + 1, `counts on by one: ${after.join(' ')}`);
  });

  it('a daemon crash while a restore is unpacked, or right after runc restore, leaves nothing half-made after its restart', async (t) => {
    assert.ok(criu.works, `a restore needs a CRIU that passes \`criu check\`: ${describeCriu(criu)}`);
    /** Runs `operation` on a daemon that kills itself at `point`, then starts the daemon again (recovery runs). */
    async function crashAt(point: string, operation: () => Promise<unknown>): Promise<void> {
      assert.equal(await env.daemon.stop(), 0);
      env.daemon = await TestDaemon.start(env.dirs, { MINICRI_TEST_CRASH_AT: point });
      await assert.rejects(operation(), (err: grpc.ServiceError) => err.code === grpc.status.UNAVAILABLE || err.code === grpc.status.INTERNAL);
      await env.daemon.exited;
      env.daemon = await TestDaemon.start(env.dirs);
    }
    const pod = await env.runPod(t, 'rstcrash');
    const id = await startCounter(pod);
    const location = join(archives, 'crash.tar');
    await call('CheckpointContainer', { container_id: id, location, timeout: 60 });
    await env.rt.runtime.call('RemoveContainer', { container_id: id });
    const dirs = await containerDirs();

    await crashAt('container-restore-unpacked', () => env.create(pod, 'counter', [], undefined, location));
    // Recovery undoes the cut-off creation in the background: wait for its record to go.
    for (const deadline = Date.now() + 15_000; (await env.rt.runtime.call('ListContainers', { filter: { pod_sandbox_id: pod.id } })).containers.length > 0;) {
      assert.ok(Date.now() < deadline, 'the cut-off restore is undone');
      await sleep(100);
    }
    assert.deepEqual((await containerDirs()).filter((d) => !dirs.includes(d)), [], 'no container dir is left');

    const restored = await env.create(pod, 'counter', [], undefined, location);
    await crashAt('container-restored', () => call('StartContainer', { container_id: restored }));
    const s = await env.status(restored);
    assert.equal(s.state, 'CONTAINER_RUNNING', 'the restore that ran is recorded as started');
    assert.ok(!existsSync(join(env.dirs.rootDir, 'containers', restored, 'restore')), 'its images went');
    const before = Number((await env.exec(restored, 'cat /counter')).stdout);
    for (const deadline = Date.now() + 10_000; Number((await env.exec(restored, 'cat /counter')).stdout) <= before;) {
      assert.ok(Date.now() < deadline, 'the restored counter counts on');
      await sleep(100);
    }
  });

  it('an archive restores only into its own namespace: another tenant\'s pod, or an archive recording none, is PERMISSION_DENIED', async (t) => {
    assert.ok(criu.works, `a checkpoint needs a CRIU that passes \`criu check\`: ${describeCriu(criu)}`);
    const source = await env.runPod(t, 'rsttenanta');
    const id = await startCounter(source);
    const location = join(archives, 'tenant-a.tar');
    await call('CheckpointContainer', { container_id: id, location, timeout: 60 });
    const dump = JSON.parse((await execa('tar', ['-xOf', location, 'config.dump'])).stdout) as Record<string, string>;
    assert.equal(dump.podNamespace, source.config.metadata!.namespace);
    assert.equal(dump.podName, 'rsttenanta');
    await env.rt.runtime.call('RemoveContainer', { container_id: id });
    const other = await env.runPod(t, 'rsttenantb', (c) => { c.metadata!.namespace = 'minicri-test-other'; });
    await refused(other, location, grpc.status.PERMISSION_DENIED, /checkpointed in namespace "minicri-test" \(pod "rsttenanta"\).*not of "minicri-test-other"/);
    // CRI-O's config.dump names no pod: nothing ties such an archive to this one.
    const { podNamespace: _, ...unowned } = JSON.parse(base()[0]!.data as string) as Record<string, string>;
    await refused(source, await archive('unowned.tar', [{ name: 'config.dump', data: JSON.stringify(unowned) }, ...base().slice(1)]),
      grpc.status.PERMISSION_DENIED, /does not record the namespace.*restore\.allow_foreign_archives/);
  });

  it('CRIU restores the privileges of the dump, not the request\'s: a restore into a container granted fewer capabilities is killed', async (t) => {
    assert.ok(criu.works, `a restore needs a CRIU that passes \`criu check\`: ${describeCriu(criu)}`);
    const pod = await env.runPod(t, 'rstcaps');
    const id = await startCounter(pod);
    const location = join(archives, 'caps.tar');
    await call('CheckpointContainer', { container_id: id, location, timeout: 60 });
    await env.rt.runtime.call('RemoveContainer', { container_id: id });
    const restored = await env.create(pod, 'counter', [], (c) => {
      c.linux = { security_context: { capabilities: { drop_capabilities: ['ALL'], add_capabilities: ['KILL'] } } };
    }, location);
    await assert.rejects(call('StartContainer', { container_id: restored }),
      grpcCode(grpc.status.FAILED_PRECONDITION, /refused, its processes killed: .*bounding capabilities CAP_CHOWN.*that the request does not grant/));
    const s = await env.status(restored);
    assert.equal(s.state, 'CONTAINER_EXITED');
    assert.equal(s.reason, 'StartError');
    assert.ok(!(await env.runcList()).includes(restored), 'nothing of it runs');
    const inCgroup = await execa('sh', ['-c', `grep -l ${restored} /proc/[0-9]*/cgroup`], { reject: false });
    assert.equal(inCgroup.stdout.trim(), '', 'no process of the restored container is left on the host');
  });

  it('refuses archives outside the archive dir, not archives, other layouts, missing images, huge ones and huge deleted.files, leaving nothing', async (t) => {
    const pod = await env.runPod(t, 'rstbad');
    const outside = join(dir, 'outside.tar');
    await writeFile(outside, await tarOf(base()));
    await refused(pod, outside, grpc.status.INVALID_ARGUMENT, /restore\.archive_dir/);
    await refused(pod, join(archives, 'nosuch.tar'), grpc.status.NOT_FOUND, /does not exist/);
    await writeFile(join(archives, 'text.tar'), 'this is not a tar archive, only text\n'.repeat(40));
    await refused(pod, join(archives, 'text.tar'), grpc.status.INVALID_ARGUMENT, /cannot be read as a tar archive|not a container checkpoint/);
    await refused(pod, await archive('other.tar', [{ name: 'index.json', data: '{}' }]), grpc.status.INVALID_ARGUMENT, /no config\.dump/);
    await refused(pod, await archive('noimages.tar', base().slice(0, 1)), grpc.status.INVALID_ARGUMENT, /no checkpoint\/inventory\.img/);
    const huge = join(archives, 'huge.tar');
    await writeFile(huge, '');
    await truncate(huge, MAX_ARCHIVE + 1); // sparse: takes no space
    await refused(pod, huge, grpc.status.INVALID_ARGUMENT, /max_archive_bytes/);
    // deleted.files is read whole and applied path by path: a bigger one, or one of more paths, than a restore takes is refused.
    await refused(pod, await archive('bigdeleted.tar', [...base(), { name: 'deleted.files', data: Buffer.alloc((16 << 20) + 1, 0x20) }]),
      grpc.status.INVALID_ARGUMENT, /deleted\.files is 16777217 bytes, more than the 16777216 \(16 MiB\) a restore reads/);
    const many = JSON.stringify(Array.from({ length: 100_001 }, (_, i) => `/tmp/f${i}`));
    await refused(pod, await archive('manydeleted.tar', [...base(), { name: 'deleted.files', data: many }]),
      grpc.status.INVALID_ARGUMENT, /deleted\.files lists 100001 paths, more than the 100000 a restore applies/);
    await refused(pod, await archive('otherimage.tar', [{ name: 'config.dump', data: '{"rootfsImage":"example.invalid/none:1","podNamespace":"minicri-test"}' }, ...base().slice(1)]),
      grpc.status.FAILED_PRECONDITION, /not on this node: pull it/);
  });

  it('images CRIU cannot restore: StartContainer is FAILED_PRECONDITION with CRIU\'s reason, and the container is EXITED with nothing running', async (t) => {
    const pod = await env.runPod(t, 'rstcriu');
    const id = await env.create(pod, 'restored', [], undefined, await archive('badimages.tar', base()));
    await assert.rejects(call('StartContainer', { container_id: id }), grpcCode(grpc.status.FAILED_PRECONDITION, /restore of container .* failed/));
    const s = await env.status(id);
    assert.equal(s.state, 'CONTAINER_EXITED');
    assert.equal(s.reason, 'StartError');
    assert.ok(!(await env.runcList()).includes(id));
    assert.ok(!existsSync(join(env.dirs.rootDir, 'containers', id, 'restore')), 'the images went');
  });

  it('hostile rootfs diffs: paths out of the root and device nodes are refused, symlinks lead only inside the container', async (t) => {
    const pod = await env.runPod(t, 'rsthostile');
    const host = join(dir, 'host-side');
    await mkdir(host);
    const diff = async (members: Member[]) => [...base(), { name: 'rootfs-diff.tar', data: await tarOf(members) }];
    await refused(pod, await archive('traversal.tar', await diff([{ name: `../../../../../..${host}/escaped`, data: 'x' }])),
      grpc.status.INVALID_ARGUMENT, /leaves the directory/);
    await refused(pod, await archive('device.tar', await diff([{ name: 'dev/mem', type: 'character-device', devmajor: 1, devminor: 1 }])),
      grpc.status.INVALID_ARGUMENT, /device nodes/);
    await refused(pod, await archive('whiteout.tar', await diff([{ name: 'etc/.wh.passwd', data: '' }])),
      grpc.status.INVALID_ARGUMENT, /whiteout/);
    // The top level too: a symlink member is no checkpoint's.
    await refused(pod, await archive('toplink.tar', [...base(), { name: 'rootfs-diff.tar', type: 'symlink', linkname: '/etc/shadow' }]),
      grpc.status.INVALID_ARGUMENT, /symlink/);
    // A symlink to a host path, then a file through it: the file lands inside the container's root.
    const id = await env.create(pod, 'linked', [], undefined, await archive('symlink.tar', await diff([
      { name: 'escape', type: 'symlink', linkname: host },
      { name: 'escape/pwned', data: 'owned' },
      { name: 'deleted', type: 'link', linkname: 'escape/pwned' },
    ])));
    assert.deepEqual(await readdir(host), [], 'nothing was written on the host side');
    const rootfs = (await readFile('/proc/self/mounts', 'utf8')).split('\n').find((l) => l.includes(id) && l.startsWith('overlay'))!.split(' ')[1]!;
    assert.equal(await readFile(join(rootfs, host, 'pwned'), 'utf8'), 'owned', 'written inside the container\'s root');
  });

  it('a spec.dump asking for host mounts and privileges is never read: the spec is the request\'s', async (t) => {
    const pod = await env.runPod(t, 'rstspec');
    const hostile = {
      process: { args: ['/bin/sh'], capabilities: { bounding: ['CAP_SYS_ADMIN'], effective: ['CAP_SYS_ADMIN'], permitted: ['CAP_SYS_ADMIN'] } },
      mounts: [{ destination: '/host', type: 'bind', source: '/', options: ['rbind', 'rw'] }],
      linux: { devices: [{ path: '/dev/sda', type: 'b', major: 8, minor: 0 }] },
    };
    const id = await env.create(pod, 'restored', [], undefined, await archive('spec.tar', [
      ...base(), { name: 'spec.dump', data: JSON.stringify(hostile) },
      { name: 'bind.mounts', data: JSON.stringify([{ source: '/', destination: '/host', file_type: 'directory', permissions: 0o755 }]) },
    ]));
    const spec = JSON.parse(await readFile(join(env.dirs.rootDir, 'containers', id, 'config.json'), 'utf8')) as {
      mounts: { destination: string; source?: string }[]; process: { capabilities: { bounding: string[] } }; linux: { devices?: { path: string }[] };
    };
    assert.ok(!spec.mounts.some((m) => m.destination === '/host' || m.source === '/'), JSON.stringify(spec.mounts));
    assert.ok(!spec.process.capabilities.bounding.includes('CAP_SYS_ADMIN'));
    assert.ok(!(spec.linux.devices ?? []).some((d) => d.path === '/dev/sda'));
    const listed = (await execa('tar', ['-tf', join(archives, 'spec.tar')])).stdout;
    assert.match(listed, /spec\.dump/, 'the hostile spec.dump was in the archive');
  });
});
