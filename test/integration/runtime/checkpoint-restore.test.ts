// Restores through runc and CRIU on real containers: a counter dumped and restored under a new conmon counts on
// from where it was dumped, its output going on in the new log; images CRIU cannot restore are FAILED_PRECONDITION
// with CRIU's reason, and leave no container, conmon or state behind.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { FailedPrecondition } from '../../../core/errors.js';
import { describeCriu, testCriu } from '../../support/criu.js';
import { conmonsMentioning, runcIds, setup, uniqueId, waitFor } from './helpers.js';

const COUNTER = ['/bin/sh', '-c', 'i=0; while :; do i=$((i+1)); echo $i; echo $i > /counter; sleep 0.1; done'];

/** The numbers a k8s-file log holds, in order. */
async function logged(path: string): Promise<number[]> {
  const text = await readFile(path, 'utf8').catch(() => '');
  return text.split('\n').filter((l) => l.includes(' stdout F ')).map((l) => Number(l.slice(l.indexOf(' stdout F ') + 10)));
}

test('a restored counter counts on from where it was dumped, into its new log', async (t) => {
  const criu = await testCriu();
  t.diagnostic(describeCriu(criu));
  assert.ok(criu.works, `a restore needs a CRIU that passes \`criu check\`: ${describeCriu(criu)} (build one with ../shared/criu/build.sh)`);
  const env = await setup(t, { criuPath: criu.path });
  const id = uniqueId('restore');
  const bundle = await env.bundle(id, COUNTER);
  await env.rt.create({ id, bundle, logPath: env.logPath(id) });
  await env.rt.start(id);
  await waitFor('the counter to count', async () => (await logged(env.logPath(id))).length >= 5);
  const work = await mkdtemp(join(env.dir, 'work-'));
  await env.rt.checkpoint(id, { imagePath: join(work, 'checkpoint'), workPath: work, signal: AbortSignal.timeout(60_000), whileFrozen: async () => {} });
  await env.rt.stop(id, { timeoutSec: 0 });
  const before = await logged(env.logPath(id));
  await env.rt.delete(id, { force: true });

  const newLog = join(env.dir, 'logs', `${id}-restored.log`);
  const { pid } = await env.rt.restore({ id, bundle, logPath: newLog, imagePath: join(work, 'checkpoint') });
  assert.ok(pid > 0);
  assert.equal((await env.rt.state(id))?.status, 'running');
  const after = await waitFor('the restored counter to write', async () => { const n = await logged(newLog); return n.length >= 3 && n; });
  const dumpedAt = Number((await readFile(join(bundle, 'rootfs', 'counter'), 'utf8')).trim());
  // No restart: the first number after the restore follows what was counted before the dump (the shell may have
  // counted on a little between the dump and the stop).
  assert.ok(after[0]! > 1, `the restored counter starts at ${after[0]}, not again at 1`);
  assert.ok(after[0]! <= before[before.length - 1]! + 1, `restored at ${after[0]}, after ${before.at(-1)} before the stop`);
  assert.ok(dumpedAt >= after[0]! - 1);
  for (let i = 1; i < after.length; i++) assert.equal(after[i], after[i - 1]! + 1, `counts on by one: ${after.join(' ')}`);
  await env.rt.delete(id, { force: true });
});

test('images CRIU cannot restore are FAILED_PRECONDITION with its reason, and leave nothing', async (t) => {
  const criu = await testCriu();
  t.diagnostic(describeCriu(criu));
  const env = await setup(t, { criuPath: criu.path });
  const id = uniqueId('badrestore');
  const bundle = await env.bundle(id, COUNTER);
  const images = join(env.dir, 'images');
  await mkdir(images);
  await writeFile(join(images, 'inventory.img'), 'not an image');
  await assert.rejects(env.rt.restore({ id, bundle, logPath: env.logPath(id), imagePath: images }), (err: Error) => {
    assert.ok(err instanceof FailedPrecondition, `${err.name}: ${err.message}`);
    assert.match(err.message, /restore of container .* failed: .*runc restore failed/);
    return true;
  });
  assert.deepEqual(await runcIds(env.root), []);
  assert.deepEqual(await conmonsMentioning(id), []);
  assert.equal(await env.rt.state(id), undefined);
});
