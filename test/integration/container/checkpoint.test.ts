// CheckpointContainer through the real daemon: the refusals (NOT_FOUND, INVALID_ARGUMENT, FAILED_PRECONDITION)
// that leave nothing behind; the archive of a running counter in CRI-O's layout with the container still
// counting afterwards. The archive is checked twice: under a runtime handler whose runc writes stand-in CRIU
// images (so the layout, rootfs diff and metadata are checked on any node), and with the real CRIU the daemon is
// configured with (test/support/criu.ts), which writes real images; only where no CRIU can work on the node (none
// built or named, the system's failing `criu check`) it fails with its own reason and changes nothing.
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { execa } from 'execa';
import { describeCriu, testCriu, type TestCriu } from '../../support/criu.js';
import { liveProcessesWhere } from '../../../oci/runtime/processes.js';
import { TestDaemon } from '../../support/daemon.js';
import { ContainerEnv, sleep, type Pod } from './env.js';

const RUNC = '/usr/sbin/runc';
const COUNTER = ['sh', '-c', 'rm /etc/group; i=0; while :; do i=$((i+1)); echo $i > /counter; sleep 0.1; done'];

function grpcCode(code: grpc.status, details?: RegExp) {
  return (err: grpc.ServiceError) => {
    assert.equal(err.code, code, `expected ${grpc.status[code]}, got ${grpc.status[err.code]}: ${err.details}`);
    if (details) assert.match(err.details, details);
    return true;
  };
}

/** runc, except that a dump writes stand-in CRIU images and logs (and the dump's arguments to `argsFile`). */
function fakeCriuRunc(argsFile: string): string {
  return `#!/bin/sh
for a; do
  if [ "$a" = checkpoint ]; then
    echo "$@" > ${argsFile}
    while [ $# -gt 0 ]; do case "$1" in --image-path) img=$2; shift;; --work-path) work=$2; shift;; esac; shift; done
    mkdir -p "$img" && echo inv > "$img/inventory.img" && echo pages > "$img/pages-1.img" && echo dumped > "$work/dump.log" && echo stats > "$work/stats-dump"
    exit
  fi
done
exec ${RUNC} "$@"
`;
}

/**
 * runc, except that a dump stands for a long CRIU that found its container frozen: a child that outlives the
 * daemon and, as it ends (once `release` exists), freezes the container again, as CRIU leaves the freezer as it found it.
 */
function strayDumpRunc(release: string): string {
  return `#!/bin/sh
for a; do
  if [ "$a" = checkpoint ]; then
    for id; do :; done
    pid=$(${RUNC} "$1" state "$id" | sed -n 's/.*"pid": *\\([0-9]*\\).*/\\1/p')
    v1=$(sed -n 's/^[0-9]*:freezer://p' /proc/$pid/cgroup)
    if [ -n "$v1" ]; then f=/sys/fs/cgroup/freezer$v1/freezer.state; s=FROZEN
    else f=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/$pid/cgroup)/cgroup.freeze; s=1; fi
    sh -c "until [ -e ${release} ]; do sleep 0.1; done; echo $s > $f" </dev/null >/dev/null 2>&1 &
    wait
    exit 1
  fi
done
exec ${RUNC} "$@"
`;
}

describe('CheckpointContainer', () => {
  let env: ContainerEnv;
  let dir: string;
  let out: string;
  let criu: TestCriu;
  before(async () => {
    criu = await testCriu();
    dir = await mkdtemp(join(tmpdir(), 'minicri-ckpt-'));
    out = join(dir, 'out');
    await mkdir(out);
    await writeFile(join(dir, 'fake-runc'), fakeCriuRunc(join(dir, 'dump-args')));
    await chmod(join(dir, 'fake-runc'), 0o755);
    await writeFile(join(dir, 'stray-runc'), strayDumpRunc(join(dir, 'stray-release')));
    await chmod(join(dir, 'stray-runc'), 0o755);
    env = await ContainerEnv.start(137, `criu_path = "${criu.path}"\n[runtimes.runc]\npath = "${RUNC}"\n`
      + `[runtimes.fakecriu]\npath = "${join(dir, 'fake-runc')}"\n[runtimes.straydump]\npath = "${join(dir, 'stray-runc')}"\n`);
  });
  after(async () => {
    try {
      await env.stop();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  const counter = async (id: string) => Number((await env.exec(id, 'cat /counter')).stdout.trim());
  /** The counter passes `value`: the container runs on. */
  async function keepsCounting(id: string, value: number): Promise<void> {
    for (const deadline = Date.now() + 10_000; (await counter(id)) <= value;) {
      assert.ok(Date.now() < deadline, `the counter did not pass ${value}`);
      await sleep(100);
    }
    assert.equal((await env.status(id)).state, 'CONTAINER_RUNNING');
  }
  async function startCounter(pod: Pod, name: string): Promise<string> {
    const id = await env.run(pod, name, COUNTER);
    for (const deadline = Date.now() + 10_000; !((await counter(id)) >= 3);) {
      assert.ok(Date.now() < deadline, 'the counter counts');
      await sleep(100);
    }
    return id;
  }
  /** Nothing of a checkpoint is left: no work dir in the container's dir, nothing but `keep` in the output dir. */
  async function nothingLeft(id: string, keep: string[] = []): Promise<void> {
    const containerDir = join(env.dirs.rootDir, 'containers', id);
    assert.deepEqual((await readdir(containerDir)).filter((f) => f.startsWith('checkpoint')), [], 'no work dir is left');
    assert.deepEqual((await readdir(out)).sort(), [...keep].sort(), 'no partial archive is left');
  }
  /** runc's own state of a container (each runtime handler has its runc root). */
  const runcStatus = async (id: string, handler = 'runc') =>
    (JSON.parse((await execa('runc', ['--root', join(dirname(env.runcRoot), handler), 'state', id])).stdout) as { status: string }).status;
  const checkpoint = (id: string, location: string, timeout = 0) => env.rt.runtime.call('CheckpointContainer', { container_id: id, location, timeout });

  it('refuses unknown containers, bad locations and containers that do not run, leaving nothing', async (t) => {
    const pod = await env.runPod(t, 'ckptbad');
    const id = await startCounter(pod, 'counter');
    await assert.rejects(checkpoint('nosuchcontainer', join(out, 'a.tar')), grpcCode(grpc.status.NOT_FOUND));
    await assert.rejects(checkpoint(id, ''), grpcCode(grpc.status.INVALID_ARGUMENT, /empty/));
    await assert.rejects(checkpoint(id, 'relative.tar'), grpcCode(grpc.status.INVALID_ARGUMENT, /absolute/));
    await assert.rejects(checkpoint(id, join(dir, 'no', 'such', 'dir', 'a.tar')), grpcCode(grpc.status.INVALID_ARGUMENT, /does not exist/));
    await assert.rejects(checkpoint(id, join(out, 'a.tar'), -1), grpcCode(grpc.status.INVALID_ARGUMENT, /timeout/));
    await writeFile(join(out, 'taken.tar'), 'mine');
    await assert.rejects(checkpoint(id, join(out, 'taken.tar')), grpcCode(grpc.status.INVALID_ARGUMENT, /already exists/));
    assert.equal(await readFile(join(out, 'taken.tar'), 'utf8'), 'mine', 'an existing file is never touched');
    const created = await env.create(pod, 'created', ['sleep', '1000']);
    await assert.rejects(checkpoint(created, join(out, 'b.tar')), grpcCode(grpc.status.FAILED_PRECONDITION, /not running/));
    const exited = await env.run(pod, 'exited', ['true']);
    await env.waitExited(exited);
    await assert.rejects(checkpoint(exited, join(out, 'c.tar')), grpcCode(grpc.status.FAILED_PRECONDITION, /not running/));
    await nothingLeft(id, ['taken.tar']);
    await rm(join(out, 'taken.tar'));
    await keepsCounting(id, await counter(id));
  });

  it('writes the archive in CRI-O\'s layout (stand-in CRIU images) and the container counts on', async (t) => {
    const pod = await env.runPod(t, 'ckptfake', (c) => { c.metadata!.namespace = 'ckpt-ns'; });
    await env.rt.runtime.call('StopPodSandbox', { pod_sandbox_id: pod.id });
    await env.rt.runtime.call('RemovePodSandbox', { pod_sandbox_id: pod.id });
    const { pod_sandbox_id: podId } = await env.rt.runtime.call('RunPodSandbox', { config: pod.config, runtime_handler: 'fakecriu' });
    t.after(() => env.rt.runtime.call('RemovePodSandbox', { pod_sandbox_id: podId }));
    const id = await startCounter({ id: podId, config: pod.config }, 'counter');
    const location = join(out, 'counter.tar');
    t.after(() => rm(location, { force: true }));
    await checkpoint(id, location, 30);

    assert.match(await readFile(join(dir, 'dump-args'), 'utf8'), new RegExp(`checkpoint --leave-running --file-locks --image-path \\S+ --work-path \\S+ ${id}`));
    const members = (await execa('tar', ['-tf', location])).stdout.split('\n');
    assert.deepEqual(members, ['stats-dump', 'dump.log', 'checkpoint/', 'checkpoint/inventory.img', 'checkpoint/pages-1.img', 'config.dump', 'spec.dump', 'bind.mounts', 'rootfs-diff.tar', 'deleted.files']);
    const read = async (member: string) => (await execa('tar', ['-xOf', location, member])).stdout;
    const config = JSON.parse(await read('config.dump')) as Record<string, unknown>;
    const status = await env.status(id);
    assert.deepEqual([config.id, config.name, config.rootfsImage, config.rootfsImageRef, config.runtime, config.restored],
      [id, 'counter', env.images.root, status.image_id, 'fakecriu', false]);
    assert.ok(Date.parse(config.createdTime as string) <= Date.parse(config.checkpointedTime as string));
    const spec = JSON.parse(await read('spec.dump')) as { process: { args: string[] }; annotations: Record<string, string> };
    assert.deepEqual(spec.process.args, COUNTER);
    assert.equal(spec.annotations['io.kubernetes.cri.container-name'], 'counter');
    assert.equal(spec.annotations['io.kubernetes.cri.sandbox-namespace'], 'ckpt-ns');
    assert.deepEqual(JSON.parse(await read('deleted.files')), ['/etc/group']);
    const binds = JSON.parse(await read('bind.mounts')) as { destination: string; file_type: string }[];
    assert.ok(binds.some((b) => b.destination === '/etc/hosts' && b.file_type === 'file'), JSON.stringify(binds));
    // The rootfs diff: the counter the container wrote, not the mount points the runtime made.
    const diffDir = join(dir, 'diff');
    await mkdir(diffDir);
    await execa('tar', ['-xf', location, '-C', diffDir, 'rootfs-diff.tar']);
    const diff = (await execa('tar', ['-tf', join(diffDir, 'rootfs-diff.tar')])).stdout.split('\n');
    assert.ok(diff.includes('counter'), diff.join(' '));
    assert.ok(!diff.some((p) => /^(etc\/hosts|etc\/resolv\.conf|dev|proc|sys)\b/.test(p)), diff.join(' '));
    const dumped = Number((await execa('tar', ['-xOf', join(diffDir, 'rootfs-diff.tar'), 'counter'])).stdout.trim());
    assert.ok(dumped >= 3);
    await keepsCounting(id, dumped);
    await nothingLeft(id, ['counter.tar']);
    // The archive as a new container's image (CRI-O's restore) is refused while restores are off, the default.
    await assert.rejects(env.create({ id: podId, config: pod.config }, 'restored', [], undefined, location),
      grpcCode(grpc.status.FAILED_PRECONDITION, /restoring containers is off on this node: set restore.enabled/));
    assert.equal((await env.rt.runtime.call('ListContainers', { filter: { pod_sandbox_id: podId } })).containers.length, 1);
  });

  it('a daemon killed while a container is frozen for its checkpoint: after the restart it runs thawed, no work dir left', async (t) => {
    t.diagnostic(describeCriu(criu));
    if (!criu.works) return t.skip(`NO CRIU CAN WORK ON THIS NODE (${describeCriu(criu)}): the frozen instant is never reached`);
    const pod = await env.runPod(t, 'ckptcrash');
    const id = await startCounter(pod, 'counter');
    assert.equal(await env.daemon.stop(), 0);
    env.daemon = await TestDaemon.start(env.dirs, { MINICRI_TEST_CRASH_AT: 'container-checkpoint-dumped' });
    await assert.rejects(checkpoint(id, join(out, 'crash.tar'), 60),
      (err: grpc.ServiceError) => err.code === grpc.status.UNAVAILABLE || err.code === grpc.status.INTERNAL);
    await env.daemon.exited;
    assert.equal(await runcStatus(id), 'paused', 'the crash came while the container was frozen');
    env.daemon = await TestDaemon.start(env.dirs);
    assert.equal(await runcStatus(id), 'running', 'recovery thawed it');
    await nothingLeft(id);
    await keepsCounting(id, await counter(id));
  });

  it('a dump still running when the daemon died ends before recovery thaws its container, which then stays thawed', async (t) => {
    const pod = await env.runPod(t, 'ckptstray');
    await env.rt.runtime.call('StopPodSandbox', { pod_sandbox_id: pod.id });
    await env.rt.runtime.call('RemovePodSandbox', { pod_sandbox_id: pod.id });
    const { pod_sandbox_id: podId } = await env.rt.runtime.call('RunPodSandbox', { config: pod.config, runtime_handler: 'straydump' });
    t.after(() => env.rt.runtime.call('RemovePodSandbox', { pod_sandbox_id: podId }));
    const id = await startCounter({ id: podId, config: pod.config }, 'counter');
    assert.equal(await env.daemon.stop(), 0);
    env.daemon = await TestDaemon.start(env.dirs, { MINICRI_TEST_CRASH_AT: 'checkpoint-dump-running' });
    await assert.rejects(checkpoint(id, join(out, 'stray.tar'), 60),
      (err: grpc.ServiceError) => err.code === grpc.status.UNAVAILABLE || err.code === grpc.status.INTERNAL);
    await env.daemon.exited;
    const release = join(dir, 'stray-release');
    const stray = () => liveProcessesWhere(({ argv }) => (argv.includes(join(dir, 'stray-runc')) && argv.includes('checkpoint'))
      || argv.some((a) => a.includes(release)));
    for (const deadline = Date.now() + 10_000; (await stray()).length < 2;) {
      assert.ok(Date.now() < deadline, 'the dump (its runc and its CRIU) outlives the daemon');
      await sleep(50);
    }
    assert.equal(await runcStatus(id, 'straydump'), 'paused', 'the crash came while the container was frozen');
    // The stray CRIU ends once the restarted daemon serves, or (a recovery waiting for it) after a while.
    const ending = setTimeout(() => void writeFile(release, ''), 5000);
    try {
      env.daemon = await TestDaemon.start(env.dirs);
    } finally {
      clearTimeout(ending);
      await writeFile(release, '');
    }
    for (const deadline = Date.now() + 10_000; (await stray()).length > 0;) {
      assert.ok(Date.now() < deadline, 'the stray dump ends');
      await sleep(100);
    }
    assert.equal(await runcStatus(id, 'straydump'), 'running', 'recovery thawed it once the dump was over');
    await nothingLeft(id);
    await keepsCounting(id, await counter(id));
  });

  it('checkpoints with the real CRIU, or fails with its reason where it cannot work, and the container counts on', async (t) => {
    const pod = await env.runPod(t, 'ckptcriu');
    const id = await startCounter(pod, 'counter');
    const location = join(out, 'real.tar');
    t.after(() => rm(location, { force: true }));
    t.diagnostic(describeCriu(criu));
    if (criu.works) {
      await checkpoint(id, location, 60);
      const members = (await execa('tar', ['-tf', location])).stdout.split('\n');
      for (const m of ['checkpoint/inventory.img', 'config.dump', 'spec.dump', 'rootfs-diff.tar']) assert.ok(members.includes(m), `${m} in ${members.join(' ')}`);
      assert.ok(members.some((m) => /^checkpoint\/pages-\d+\.img$/.test(m)));
      await nothingLeft(id, ['real.tar']);
    } else {
      await assert.rejects(checkpoint(id, location, 60), grpcCode(grpc.status.FAILED_PRECONDITION, /CRIU: Error/));
      t.diagnostic('no CRIU can work on this node: its failure was checked');
      await nothingLeft(id);
    }
    await keepsCounting(id, await counter(id));
  });
});
