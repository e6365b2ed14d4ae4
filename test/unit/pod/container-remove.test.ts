// RemoveContainer through the fakes: the container is gone (record moved, name free) and its host objects
// released when the call returns (a release that hangs is waited for a while only); a failed release is retried,
// finished by its sandbox's removal and by recovery after a crash, and never runs twice at once.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { silentLogger } from '../../../core/log.js';
import { createContainer } from '../../../pod/container-create.js';
import { CLEANUP_WAIT_MS, removeContainer } from '../../../pod/container-remove.js';
import { Retrier } from '../../../pod/pending.js';
import { recover } from '../../../pod/recovery.js';
import { removeSandbox } from '../../../pod/sandbox-remove.js';
import { runSandbox } from '../../../pod/sandbox-run.js';
import { fakePods, type FakePods } from '../../support/fake-pods.js';
import { containerConfig, sandboxConfig } from '../spec/fixtures.js';

describe('RemoveContainer and the cleanup after it', () => {
  let f: FakePods;
  let sandboxId: string;
  beforeEach(async () => {
    f = fakePods();
    sandboxId = await runSandbox(f.ctx, sandboxConfig({ log_directory: join(f.dir, 'logs') }), '', silentLogger);
    f.journal.length = 0;
  });
  afterEach(() => f.close());

  const create = () => createContainer(f.ctx, sandboxId, containerConfig({ image: { image: 'example.test/app:1', annotations: {}, user_specified_image: '', runtime_handler: '', image_ref: '' } }), null, silentLogger);
  /** How often the root filesystem was released: only a cleanup does it. */
  const rootfsReleases = () => f.journal.filter((e) => e === 'undo:rootfs').length;
  /** Makes the rootfs release fail until `heal` is called, as a mount still busy would. */
  function breakRootfsRelease(): { heal: () => void } {
    const removeOf = f.ctx.images.removeRootfs.bind(f.ctx.images);
    f.ctx.images.removeRootfs = async () => { throw new Error('umount: target is busy'); };
    return { heal: () => { f.ctx.images.removeRootfs = removeOf; } };
  }

  it('takes the record away, frees the name, and releases the rest before it returns', async () => {
    const id = await create();
    await removeContainer(f.ctx, id, silentLogger);
    assert.equal(f.ctx.tables.containers.get(id), undefined, 'gone for every caller once the call returns');
    assert.equal(f.ctx.tables.containerCleanups.get(id), undefined, 'the cleanup finished and took its record');
    assert.equal(rootfsReleases(), 1);
    const again = await create();
    assert.notEqual(again, id, 'the name is free for a new container');
  });

  it('answers after a while when the release hangs, leaving it to finish in the background', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const id = await create();
    let release: () => void = () => undefined;
    const removeOf = f.ctx.images.removeRootfs.bind(f.ctx.images);
    f.ctx.images.removeRootfs = (cid) => new Promise<void>((resolve) => { release = resolve; }).then(() => removeOf(cid));
    let answered = false;
    const removal = removeContainer(f.ctx, id, silentLogger).then(() => { answered = true; });
    for (let i = 0; i < 20 && !answered; i++) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      t.mock.timers.tick(CLEANUP_WAIT_MS / 10);
    }
    await removal;
    assert.equal(answered, true, 'the call answered once its wait was over');
    assert.equal(f.ctx.tables.containers.get(id), undefined);
    assert.ok(f.ctx.tables.containerCleanups.get(id), 'the release is still pending');
    release();
    await f.ctx.background.drain();
    assert.equal(f.ctx.tables.containerCleanups.get(id), undefined, 'and finished after');
    assert.equal(rootfsReleases(), 1);
  });

  it('a second RemoveContainer of the same container also answers after its release', async () => {
    const id = await create();
    await Promise.all([removeContainer(f.ctx, id, silentLogger), removeContainer(f.ctx, id, silentLogger)].map((p, i) =>
      p.then(() => assert.equal(f.ctx.tables.containerCleanups.get(id), undefined, `call ${i + 1} answered after the release`))));
    assert.equal(rootfsReleases(), 1, 'released once');
  });

  it('keeps a failed cleanup with its error and backoff, and the background retry finishes it', async () => {
    const id = await create();
    const broken = breakRootfsRelease();
    await removeContainer(f.ctx, id, silentLogger);
    await f.ctx.background.drain();
    const pending = f.ctx.tables.containerCleanups.get(id);
    assert.equal(pending?.removing.attempts, 1);
    assert.match(pending!.removing.lastError, /target is busy/);
    assert.ok(pending!.removing.nextAt > Date.now(), 'the next try waits for its backoff');
    assert.equal(f.ctx.tables.containers.get(id), undefined);

    broken.heal();
    f.ctx.tables.containerCleanups.update(id, (r) => { r.removing.nextAt = 0; });
    await new Retrier(f.ctx, silentLogger).tick();
    assert.equal(f.ctx.tables.containerCleanups.get(id), undefined);
    assert.equal(rootfsReleases(), 1, 'the retry released the rootfs');
  });

  it('removing the sandbox finishes the cleanups of its removed containers first', async () => {
    const id = await create();
    const broken = breakRootfsRelease();
    await removeContainer(f.ctx, id, silentLogger);
    await f.ctx.background.drain();
    broken.heal();
    f.journal.length = 0;
    await removeSandbox(f.ctx, sandboxId, silentLogger);
    assert.equal(f.ctx.tables.containerCleanups.get(id), undefined);
    assert.equal(f.ctx.tables.sandboxes.get(sandboxId), undefined);
    // The container's rootfs and the pause's.
    assert.equal(rootfsReleases(), 2);
  });

  it('recovery finishes a cleanup the crash cut off, and redoes a removal cut off mid-move', async () => {
    const moved = await create();
    const record = f.ctx.tables.containers.get(moved)!;
    // The daemon died right after the record moved: the cleanup record alone is left.
    f.ctx.tables.containerCleanups.put({ ...record, removing: { attempts: 0, nextAt: Date.now() + 60_000, lastError: '' } });
    f.ctx.tables.containers.delete(moved);
    // It died between writing the cleanup record and deleting the container's: both are left.
    const midway = await createContainer(f.ctx, sandboxId, containerConfig({ metadata: { name: 'second', attempt: 0 }, image: { image: 'example.test/app:1', annotations: {}, user_specified_image: '', runtime_handler: '', image_ref: '' } }), null, silentLogger);
    f.ctx.tables.containers.update(midway, (r) => { r.removing = { attempts: 0, nextAt: Date.now() + 60_000, lastError: '' }; });
    f.ctx.tables.containerCleanups.put({ ...f.ctx.tables.containers.get(midway)!, removing: { attempts: 0, nextAt: Date.now() + 60_000, lastError: '' } });
    f.journal.length = 0;

    const { finished } = await recover(f.ctx, silentLogger);
    await finished;
    for (const id of [moved, midway]) {
      assert.equal(f.ctx.tables.containers.get(id), undefined, id);
      assert.equal(f.ctx.tables.containerCleanups.get(id), undefined, id);
    }
    assert.equal(rootfsReleases(), 2, 'each container\'s rootfs released once');
    assert.equal(f.ctx.locks.busy, false);
  });
});
