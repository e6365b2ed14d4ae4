// Recovery after a crash, through the fakes: what answers depend on is settled before recover() returns;
// cut-off creations are undone after it, under the locks their operations take, so a call about them waits.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { KeyedLock } from '../../../core/locks.js';
import { silentLogger } from '../../../core/log.js';
import { createContainer } from '../../../pod/container-create.js';
import { recover } from '../../../pod/recovery.js';
import { removeSandbox } from '../../../pod/sandbox-remove.js';
import { runSandbox } from '../../../pod/sandbox-run.js';
import { fakePods, type FakePods } from '../../support/fake-pods.js';
import { containerConfig, sandboxConfig } from '../spec/fixtures.js';

/** A promise and the function that settles it. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  return { opened: new Promise<void>((resolve) => { open = resolve; }), open };
}

describe('KeyedLock.hold', () => {
  it('queues the claim at once and lets the next holder in only when released', async () => {
    const locks = new KeyedLock();
    const release = locks.hold('k');
    const order: string[] = [];
    const next = locks.run('k', async () => { order.push('next'); });
    const releaseNow = await release;
    await new Promise((r) => setImmediate(r));
    assert.equal(order.length, 0, 'the next holder ran while the claim was held');
    order.push('released');
    releaseNow();
    await next;
    assert.deepEqual(order, ['released', 'next']);
    assert.equal(locks.busy, false);
  });
});

describe('recovery of cut-off creations', () => {
  let f: FakePods;
  beforeEach(() => { f = fakePods(); });
  afterEach(() => f.close());

  const podConfig = (name = 'web') => sandboxConfig({ log_directory: join(f.dir, 'logs'), metadata: { name, uid: `uid-${name}`, namespace: 'default', attempt: 0 } });

  /** A sandbox whose creation the crash cut off after everything was made but READY was not yet written. */
  async function cutOffSandbox(name: string): Promise<string> {
    const id = await runSandbox(f.ctx, podConfig(name), '', silentLogger);
    f.ctx.tables.sandboxes.update(id, (r) => { r.creating = true; r.state = 'SANDBOX_NOTREADY'; });
    return id;
  }

  it('returns before the undo, which runs under the sandbox\'s locks; a call about the sandbox waits for it', async () => {
    const ready = await runSandbox(f.ctx, podConfig('stays'), '', silentLogger);
    const cut = await cutOffSandbox('cut');
    const runtime = f.ctx.runtimes.get('runc')!;
    // Every pause is still running, as after a kill -9 of the daemon alone.
    runtime.state = async (id) => ({ status: 'running', pid: 4242, bundle: join(f.dir, id) });
    const deleteOf = runtime.delete.bind(runtime);
    const paused = gate();
    runtime.delete = async (id, opts) => { await paused.opened; return deleteOf(id, opts); };
    f.journal.length = 0;

    const { finished } = await recover(f.ctx, silentLogger);
    assert.ok(f.ctx.tables.sandboxes.get(cut), 'the undo ran before recover returned');
    let removed = false;
    const removal = removeSandbox(f.ctx, cut, silentLogger).then(() => { removed = true; });
    // A retried RunPodSandbox of the same pod waits for the name its cut-off attempt holds, then succeeds.
    const retry = runSandbox(f.ctx, podConfig('cut'), '', silentLogger);
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(removed, false, 'RemovePodSandbox did not wait for the undo');

    paused.open();
    await finished;
    await removal;
    const again = await retry;
    assert.equal(f.ctx.tables.sandboxes.get(cut), undefined);
    assert.equal(f.ctx.tables.sandboxes.get(again)?.state, 'SANDBOX_READY');
    assert.ok(f.journal.includes('undo:cni') && f.journal.includes('undo:netns') && f.journal.includes('undo:rootfs'), f.journal.join(' '));
    assert.equal(f.ctx.tables.sandboxes.get(ready)?.state, 'SANDBOX_READY', 'a sandbox no crash cut off was touched');
  });

  it('undoes a cut-off container before the removal of its sandbox that the crash interrupted', async () => {
    const pod = await runSandbox(f.ctx, podConfig(), '', silentLogger);
    const container = await createContainer(f.ctx, pod, containerConfig({ image: { image: 'example.test/app:1', annotations: {}, user_specified_image: '', runtime_handler: '', image_ref: '' } }), null, silentLogger);
    f.ctx.tables.containers.update(container, (r) => { r.creating = true; });
    f.ctx.tables.sandboxes.update(pod, (r) => { r.removing = { attempts: 0, nextAt: 0, lastError: '' }; });

    const { finished } = await recover(f.ctx, silentLogger);
    await finished;
    assert.equal(f.ctx.tables.containers.get(container), undefined);
    assert.equal(f.ctx.tables.sandboxes.get(pod), undefined);
    assert.equal(f.ctx.locks.busy, false);
  });

  it('thaws a running container a checkpoint cut off by the crash left frozen (its work dir tells), and no other', async () => {
    const pod = await runSandbox(f.ctx, podConfig(), '', silentLogger);
    const image = { image: 'example.test/app:1', annotations: {}, user_specified_image: '', runtime_handler: '', image_ref: '' };
    const frozen = await createContainer(f.ctx, pod, containerConfig({ metadata: { name: 'frozen', attempt: 0 }, image }), null, silentLogger);
    const running = await createContainer(f.ctx, pod, containerConfig({ metadata: { name: 'running', attempt: 0 }, image }), null, silentLogger);
    for (const id of [frozen, running]) f.ctx.tables.containers.update(id, (r) => { r.state = 'CONTAINER_RUNNING'; });
    const runtime = f.ctx.runtimes.get('runc')!;
    // runc's state files say running for a frozen container too: only runc resume tells (see thawIfFrozen).
    runtime.state = async (id) => ({ status: 'running', pid: 4242, bundle: join(f.dir, id) });
    const resumed: string[] = [];
    runtime.resume = async (id) => {
      if (id !== frozen) throw new Error(`cannot resume container "${id}": runc: container not paused`);
      resumed.push(id);
    };
    // The cut-off checkpoint's work dir (CRIU's memory images) is left in the container's dir, beside its own files.
    const dir = f.ctx.tables.containers.get(frozen)!.dir;
    mkdirSync(join(dir, 'checkpoint-x1Y2z3'), { recursive: true });
    writeFileSync(join(dir, 'checkpoint-x1Y2z3', 'pages-1.img'), 'memory');
    writeFileSync(join(dir, 'kept'), 'the container\'s own');

    const { finished } = await recover(f.ctx, silentLogger);
    await finished;
    assert.deepEqual(resumed, [frozen]);
    assert.equal(f.ctx.tables.containers.get(frozen)?.state, 'CONTAINER_RUNNING');
    assert.equal(existsSync(join(dir, 'checkpoint-x1Y2z3')), false, 'the work dir went at recovery');
    assert.equal(existsSync(join(dir, 'kept')), true);
  });
});
