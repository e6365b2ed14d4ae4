// Checkpoints through runc and CRIU on real containers: the dump of a running counter into CRIU's images,
// the container frozen while its files are copied and running afterwards, the timeout, and the refusals.
// The CRIU is test/support/criu.ts's: a working one wherever one was built or named, and then the dump must
// succeed. Only on a node with nothing but a system CRIU that fails `criu check` must the checkpoint fail with
// CRIU's own reason and leave the container running as it was.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DeadlineExceeded, FailedPrecondition } from '../../../core/errors.js';
import { silentLogger } from '../../../core/log.js';
import { liveProcesses } from '../../../oci/runtime/processes.js';
import { OciRuntime } from '../../../oci/runtime/runc.js';
import { describeCriu, testCriu } from '../../support/criu.js';
import { CONMON, RUNC, setup, uniqueId, waitFor, type Env } from './helpers.js';

const COUNTER = ['/bin/sh', '-c', 'i=0; while :; do i=$((i+1)); echo $i > /counter; sleep 0.1; done'];

async function counter(bundle: string): Promise<number> {
  return Number((await readFile(join(bundle, 'rootfs', 'counter'), 'utf8').catch(() => '0')).trim() || 0);
}

async function startCounter(env: Env, rt: OciRuntime, prefix: string): Promise<{ id: string; bundle: string }> {
  const id = uniqueId(prefix);
  const bundle = await env.bundle(id, COUNTER);
  await rt.create({ id, bundle, logPath: env.logPath(id) });
  await rt.start(id);
  await waitFor('the counter to count', async () => (await counter(bundle)) >= 3);
  return { id, bundle };
}

/** The counter goes past `value`: the container runs. */
function keepsCounting(bundle: string, value: number): Promise<boolean> {
  return waitFor(`the counter to pass ${value}`, async () => (await counter(bundle)) > value);
}

test('a checkpoint dumps a running counter into CRIU images, frozen meanwhile, and the counter goes on', async (t) => {
  const criu = await testCriu();
  t.diagnostic(describeCriu(criu));
  const env = await setup(t, { criuPath: criu.path });
  const { id, bundle } = await startCounter(env, env.rt, 'ckpt');
  const work = await mkdtemp(join(env.dir, 'work-'));
  const frozen: number[] = [];
  const request = {
    imagePath: join(work, 'checkpoint'),
    workPath: work,
    signal: AbortSignal.timeout(60_000),
    whileFrozen: async () => {
      frozen.push(await counter(bundle));
      await new Promise((r) => setTimeout(r, 400));
      frozen.push(await counter(bundle));
    },
  };
  if (criu.works) {
    await env.rt.checkpoint(id, request);
    const images = await readdir(request.imagePath);
    assert.ok(images.includes('inventory.img'), `images: ${images.join(' ')}`);
    assert.ok(images.some((f) => /^pages-\d+\.img$/.test(f)), `images: ${images.join(' ')}`);
    assert.ok((await readdir(work)).includes('dump.log'));
    assert.equal(frozen.length, 2);
    assert.equal(frozen[0], frozen[1], 'the counter stood still while the container was frozen');
  } else {
    // CRIU's own reason reaches the caller, and nothing was copied: there was no dump to match.
    await assert.rejects(env.rt.checkpoint(id, request), (err: Error) => {
      assert.ok(err instanceof FailedPrecondition, `${err.name}: ${err.message}`);
      assert.match(err.message, /CRIU: .*Error/);
      return true;
    });
    assert.deepEqual(frozen, []);
    t.diagnostic('no working CRIU on this node: the failure path was tested');
  }
  assert.equal((await env.rt.state(id))?.status, 'running', 'resumed, not left paused');
  await keepsCounting(bundle, frozen[1] ?? (await counter(bundle)));
  await env.rt.delete(id, { force: true });
});

test('a checkpoint past its deadline stops runc, resumes the container and says DEADLINE_EXCEEDED', async (t) => {
  const env = await setup(t);
  // runc for everything but the dump, which here never ends.
  const slowRunc = join(env.dir, 'slow-runc');
  await writeFile(slowRunc, `#!/bin/sh\nfor a; do [ "$a" = checkpoint ] && exec sleep 600; done\nexec ${RUNC} "$@"\n`);
  await chmod(slowRunc, 0o755);
  const rt = new OciRuntime({ runtimePath: slowRunc, conmonPath: CONMON, root: env.root, stateDir: env.stateDir, log: silentLogger, cgroupManager: 'cgroupfs' });
  const { id, bundle } = await startCounter(env, rt, 'ckpttmo');
  const work = await mkdtemp(join(env.dir, 'work-'));
  let copied = false;
  await assert.rejects(rt.checkpoint(id, {
    imagePath: join(work, 'checkpoint'), workPath: work, signal: AbortSignal.timeout(500), whileFrozen: async () => { copied = true; },
  }), DeadlineExceeded);
  assert.equal(copied, false);
  assert.equal((await rt.state(id))?.status, 'running');
  await keepsCounting(bundle, await counter(bundle));
  assert.deepEqual(await liveProcesses('sleep', '600'), [], 'the stuck dump was killed');
  await rt.delete(id, { force: true });
});

test('a container that is not running cannot be checkpointed', async (t) => {
  const env = await setup(t);
  const id = uniqueId('ckptcreated');
  await env.rt.create({ id, bundle: await env.bundle(id, COUNTER), logPath: env.logPath(id) });
  const work = await mkdtemp(join(env.dir, 'work-'));
  await assert.rejects(env.rt.checkpoint(id, {
    imagePath: join(work, 'checkpoint'), workPath: work, signal: AbortSignal.timeout(10_000), whileFrozen: async () => {},
  }), FailedPrecondition);
  assert.equal((await env.rt.state(id))?.status, 'created');
  await env.rt.delete(id, { force: true });
});
