// CheckpointPod and RestorePod through the fakes: every container frozen before any is dumped and every one thawed
// whatever failed, the output directory left as it was on a failure, a checkpoint that restores into a new sandbox
// with its containers CREATED and restoring, and a restore that fails half-way leaving no sandbox and no container.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { Cancelled, DeadlineExceeded, FailedPrecondition, Internal, InvalidArgument, Unavailable } from '../../../core/errors.js';
import { silentLogger } from '../../../core/log.js';
import { createContainer } from '../../../pod/container-create.js';
import { Retrier } from '../../../pod/pending.js';
import { checkpointPod, type CallLimits } from '../../../pod/pod-checkpoint.js';
import { restorePod } from '../../../pod/pod-restore.js';
import { runSandbox } from '../../../pod/sandbox-run.js';
import { fakePods, IMAGE, type FakePods } from '../../support/fake-pods.js';
import { containerConfig, sandboxConfig } from '../spec/fixtures.js';

const call = (): CallLimits => ({ log: silentLogger, signal: new AbortController().signal, deadline: Date.now() + 60_000 });
const image = { image: IMAGE.repoTags[0]!, annotations: {}, user_specified_image: '', runtime_handler: '', image_ref: '' };

describe('CheckpointPod and RestorePod orchestration', () => {
  let f: FakePods;
  let archives: string;
  let ids: string[];
  let pod: string;
  /** What the runtime was asked, in order. */
  let calls: string[];
  beforeEach(async () => {
    f = fakePods();
    archives = join(f.dir, 'checkpoints');
    mkdirSync(archives);
    f.ctx.settings.restore = { enabled: true, archive_dir: archives, max_archive_bytes: 1 << 20, allow_foreign_archives: false };
    pod = await runSandbox(f.ctx, podConfig('web'), '', silentLogger);
    ids = [];
    for (const name of ['one', 'two']) {
      ids.push(await createContainer(f.ctx, pod, containerConfig({ metadata: { name, attempt: 0 }, image, log_path: `${name}/0.log` }), null, silentLogger));
    }
    for (const id of ids) {
      const r = f.ctx.tables.containers.update(id, (c) => { c.state = 'CONTAINER_RUNNING'; });
      mkdirSync(r.rootfsUpper!, { recursive: true }); // the fake root filesystem's writable layer, empty
    }
    calls = [];
    const runtime = f.ctx.runtimes.get('runc')!;
    runtime.state = async (id) => ({ status: 'running', pid: 4242, bundle: join(f.dir, id) });
    runtime.pause = async (id) => { calls.push(`pause:${name(id)}`); };
    runtime.resume = async (id) => { calls.push(`resume:${name(id)}`); };
    runtime.dump = async (id, r) => {
      calls.push(`dump:${name(id)}`);
      mkdirSync(r.imagePath);
      writeFileSync(join(r.imagePath, 'inventory.img'), 'images');
    };
  });
  afterEach(() => f.close());

  const podConfig = (name: string) => sandboxConfig({
    log_directory: join(f.dir, 'logs', name), metadata: { name, uid: `uid-${name}`, namespace: 'default', attempt: 0 },
  });
  const name = (id: string) => f.ctx.tables.containers.get(id)?.config.metadata.name ?? id;
  const outDir = (n: string) => { const d = join(archives, n); mkdirSync(d); return d; };
  const workDirs = () => ids.flatMap((id) => readdirSync(f.ctx.tables.containers.get(id)!.dir).filter((e) => e.startsWith('checkpoint-')));

  it('freezes every container before dumping any, thaws all, and writes pod.json and one archive each', async () => {
    const out = outDir('ok');
    await checkpointPod(f.ctx, { podSandboxId: pod, outputPath: out, containerIds: ids, options: {} }, call());
    assert.deepEqual(calls, ['pause:one', 'pause:two', 'dump:one', 'dump:two', 'resume:one', 'resume:two']);
    assert.deepEqual(readdirSync(out).sort(), ['containers', 'pod.json']);
    assert.deepEqual(readdirSync(join(out, 'containers')).sort(), ids.map((id) => `${id}.tar`).sort());
    assert.deepEqual(workDirs(), []);
    assert.deepEqual(f.ctx.tables.podCheckpoints.list(), []);
  });

  it('a dump that fails: every frozen container thawed, nothing left in the directory, no intent left', async () => {
    const runtime = f.ctx.runtimes.get('runc')!;
    const dump = runtime.dump;
    runtime.dump = async (id, r) => {
      if (name(id) === 'two') { calls.push('dump:two'); throw new Error('CRIU refused'); }
      return dump(id, r);
    };
    const out = outDir('failed');
    await assert.rejects(checkpointPod(f.ctx, { podSandboxId: pod, outputPath: out, containerIds: ids, options: {} }, call()), /CRIU refused/);
    assert.deepEqual(calls, ['pause:one', 'pause:two', 'dump:one', 'dump:two', 'resume:one', 'resume:two']);
    assert.deepEqual(readdirSync(out), []);
    assert.deepEqual(workDirs(), []);
    assert.deepEqual(f.ctx.tables.podCheckpoints.list(), []);
  });

  it('a thaw that fails keeps the intent, and the background retry thaws the container; a pause failing half-way is thawed too', async () => {
    const runtime = f.ctx.runtimes.get('runc')!;
    const resume = runtime.resume;
    let failing = true;
    runtime.resume = async (id) => {
      if (name(id) === 'two' && failing) { calls.push('resume:two'); throw new Error('cgroup busy'); }
      return resume(id);
    };
    const out = outDir('unthawed');
    await assert.rejects(checkpointPod(f.ctx, { podSandboxId: pod, outputPath: out, containerIds: ids, options: {} }, call()),
      (e: Error) => e instanceof Internal && /could not be thawed \(cgroup busy\); minicri tries again/.test(e.message));
    assert.deepEqual(readdirSync(out), []);
    const left = f.ctx.tables.podCheckpoints.list();
    assert.deepEqual(left.map((c) => [c.containerIds, c.thawOnly]), [[[ids[1]], true]], 'the intent stays for the frozen one');
    runtime.state = async (id) => ({ status: 'paused', pid: 4242, bundle: join(f.dir, id) });
    calls = [];
    await new Retrier(f.ctx, silentLogger).tick();
    assert.deepEqual(calls, ['resume:two']);
    assert.equal(f.ctx.tables.podCheckpoints.list().length, 1, 'still frozen: kept for the next try');
    failing = false;
    calls = [];
    await new Retrier(f.ctx, silentLogger).tick();
    assert.deepEqual(calls, ['resume:two']);
    assert.deepEqual(f.ctx.tables.podCheckpoints.list(), [], 'thawed: the intent goes');

    // runc pause fails after freezing the cgroup: thawed with the others.
    runtime.state = async (id) => ({ status: 'running', pid: 4242, bundle: join(f.dir, id) });
    runtime.pause = async (id) => { calls.push(`pause:${name(id)}`); if (name(id) === 'two') throw new Error('pause half done'); };
    calls = [];
    await assert.rejects(checkpointPod(f.ctx, { podSandboxId: pod, outputPath: outDir('halfpaused'), containerIds: ids, options: {} }, call()),
      /pause half done/);
    assert.deepEqual(calls, ['pause:one', 'pause:two', 'resume:one', 'resume:two']);
  });

  it('a checkpoint whole only after the call ended leaves nothing; a cancelled call says CANCELLED, a late one DEADLINE_EXCEEDED', async () => {
    for (const reason of [new Cancelled('CheckpointPod: the client cancelled the call'), new DeadlineExceeded('CheckpointPod: the client\'s deadline passed')]) {
      const controller = new AbortController();
      // Past the archives, before pod.json: the call ends there.
      f.ctx.network.deviceStatus = async () => { controller.abort(reason); return undefined; };
      const out = outDir(`late-${reason.code}`);
      await assert.rejects(checkpointPod(f.ctx, { podSandboxId: pod, outputPath: out, containerIds: ids, options: {} },
        { ...call(), signal: controller.signal }), (e: Error) => e.constructor === reason.constructor);
      assert.deepEqual(readdirSync(out), []);
      assert.deepEqual(f.ctx.tables.podCheckpoints.list(), []);
    }
  });

  it('a cleanup that fails is logged beside the failure, which stays the answer, and the intent stays for the next start', async () => {
    const runtime = f.ctx.runtimes.get('runc')!;
    const out = outDir('stuck');
    runtime.dump = async (id) => {
      calls.push(`dump:${name(id)}`);
      mkdirSync(join(out, 'containers', 'not-a-file')); // what the removal of archives cannot remove
      throw new Error('CRIU refused');
    };
    await assert.rejects(checkpointPod(f.ctx, { podSandboxId: pod, outputPath: out, containerIds: ids, options: {} }, call()), /CRIU refused/);
    assert.deepEqual(f.ctx.tables.podCheckpoints.list().map((c) => [c.containerIds, c.thawOnly]), [[[], undefined]]);
  });

  it('a freeze that caught a process mid-exit: all thawed, and the whole cut taken again', async () => {
    const runtime = f.ctx.runtimes.get('runc')!;
    const dump = runtime.dump;
    let raced = false;
    runtime.dump = async (id, r) => {
      if (name(id) === 'two' && !raced) {
        raced = true;
        calls.push('dump:two');
        throw new Unavailable('one of its processes was exiting when it was frozen');
      }
      return dump(id, r);
    };
    const out = outDir('again');
    await checkpointPod(f.ctx, { podSandboxId: pod, outputPath: out, containerIds: ids, options: {} }, call());
    const round = ['pause:one', 'pause:two', 'dump:one', 'dump:two', 'resume:one', 'resume:two'];
    assert.deepEqual(calls, [...round, ...round]);
    assert.deepEqual(readdirSync(join(out, 'containers')).sort(), ids.map((id) => `${id}.tar`).sort());
    assert.deepEqual(workDirs(), []);
  });

  it('restores into a new sandbox with every container CREATED and restoring; a failure half-way leaves nothing', async () => {
    const out = outDir('restorable');
    await checkpointPod(f.ctx, { podSandboxId: pod, outputPath: out, containerIds: ids, options: {} }, call());
    const configs = ['one', 'two'].map((n) => containerConfig({ metadata: { name: n, attempt: 0 }, image, log_path: `${n}/0.log` }));
    const request = { checkpointPath: out, runtimeHandler: '', options: {}, containerConfigs: configs, stopSignals: [0, 0] };
    const settings = f.ctx.settings.restore;
    f.ctx.settings.restore = undefined;
    await assert.rejects(restorePod(f.ctx, { ...request, config: podConfig('moved') }, call()),
      (e: Error) => e instanceof FailedPrecondition && /restoring pods is off on this node: set restore.enabled = true/.test(e.message));
    f.ctx.settings.restore = { ...settings!, archive_dir: join(f.dir, 'elsewhere') };
    await assert.rejects(restorePod(f.ctx, { ...request, config: podConfig('moved') }, call()),
      (e: Error) => e instanceof InvalidArgument && /outside .*elsewhere \(restore\.archive_dir\)/.test(e.message));
    f.ctx.settings.restore = settings;
    // containers/ leading out of restore.archive_dir: refused though each archive is a file at its name.
    const linked = outDir('linked');
    cpSync(join(out, 'pod.json'), join(linked, 'pod.json'));
    cpSync(join(out, 'containers'), join(f.dir, 'outside'), { recursive: true });
    symlinkSync(join(f.dir, 'outside'), join(linked, 'containers'));
    await assert.rejects(restorePod(f.ctx, { ...request, checkpointPath: linked, config: podConfig('moved') }, call()),
      (e: Error) => e instanceof InvalidArgument && /archive containers\/\w+\.tar leads to .*outside .* \(restore\.archive_dir\)/.test(e.message));
    // pod.json that is no regular file is never opened (a FIFO would block a read for ever).
    const fifo = outDir('fifo');
    execFileSync('mkfifo', [join(fifo, 'pod.json')]);
    await assert.rejects(restorePod(f.ctx, { ...request, checkpointPath: fifo, config: podConfig('moved') }, call()),
      (e: Error) => e instanceof InvalidArgument && /pod\.json of checkpoint .* is a FIFO, not a regular file/.test(e.message));
    assert.equal(f.ctx.tables.sandboxes.list().length, 1, 'refusals make nothing');
    const restored = await restorePod(f.ctx, { ...request, config: podConfig('moved') }, call());
    assert.notEqual(restored.podSandboxId, pod);
    assert.deepEqual(restored.restored.map((r) => r.name), ['one', 'two']);
    for (const { containerId } of restored.restored) {
      const r = f.ctx.tables.containers.get(containerId)!;
      assert.deepEqual([r.sandboxId, r.state, r.restoring], [restored.podSandboxId, 'CONTAINER_CREATED', true]);
    }
    assert.equal(f.ctx.tables.sandboxes.get(restored.podSandboxId)!.restoring, undefined, 'the mark goes once the restore is done');

    // The second container's root filesystem fails: the sandbox goes with the first container.
    const before = { sandboxes: f.ctx.tables.sandboxes.list().length, containers: f.ctx.tables.containers.list().length };
    const prepare = f.ctx.images.prepareRootfs;
    let made = 0;
    f.ctx.images.prepareRootfs = async (key, ref, o) => {
      if (f.ctx.tables.containers.get(key) && ++made === 2) throw new Error('no space left');
      return prepare(key, ref, o);
    };
    await assert.rejects(restorePod(f.ctx, { ...request, config: podConfig('again') }, call()), /no space left/);
    assert.deepEqual({ sandboxes: f.ctx.tables.sandboxes.list().length, containers: f.ctx.tables.containers.list().length }, before);
  });
});
