// A started daemon warms up its pull path once it is quiet (warm_up_pulls, on by default): a made-up image from
// a registry of its own through its own pull code, nothing of it left in the store, its two unpack workers
// running after it, and a real pull after it on them. With the setting off there is no warm-up.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { makeDaemonDirs, removeDirs, TestDaemon } from '../../support/daemon.js';
import { hostCheck } from '../../support/pod-daemon.js';
import { startRegistry } from '../../support/registry.js';
import { buildImage, pushImage } from '../../support/test-images.js';
import { until } from '../../support/wait.js';

hostCheck('the pull warm-up test');

const threads = (pid: number) => readdir(`/proc/${pid}/task`).then((t) => t.length);

test('a daemon warms up its pull path once quiet, keeps nothing of it but its workers, and pulls as before', { timeout: 120_000 }, async (t) => {
  const registry = await startRegistry();
  t.after(() => registry.stop());
  // Incompressible and over 128 KiB: unpacked on a worker.
  const image = await buildImage([{ entries: [{ name: 'app/data', data: randomBytes(1 << 20) }] }], { Cmd: ['/bin/true'] });
  await pushImage(registry, 'test/after-warm-up', ['1'], image);

  const warm = makeDaemonDirs('warm_up_pulls = true\nlog_level = "info"');
  const cold = makeDaemonDirs('log_level = "info"');
  const [daemon, plain] = await Promise.all([TestDaemon.start(warm), TestDaemon.start(cold)]);
  t.after(async () => { await Promise.all([daemon.stop(), plain.stop()]); removeDirs(warm); removeDirs(cold); });
  const pid = daemon.process.pid!;
  const atStart = await threads(pid);
  const layersAtStart = await readdir(join(warm.rootDir, 'images', 'layers'));
  const plainAtStart = await threads(plain.process.pid!);

  const line = await until('the warm-up to be logged', async () =>
    daemon.log().split('\n').find((l) => l.includes('"pull path warmed up"')), 60_000);
  assert.match(line, /"module":"images"/);
  assert.doesNotMatch(daemon.log(), /warming up the pull path failed/);
  assert.deepEqual(await readdir(join(warm.rootDir, 'images', 'tmp')), [], 'its layers unpacked into tmp are gone');
  assert.deepEqual(await readdir(join(warm.rootDir, 'images', 'layers')), layersAtStart, 'no layer stored but the pause image\'s');
  const listed = await daemon.client.image.call('ListImages', {});
  assert.deepEqual(listed.images.flatMap((i) => i.repo_tags).filter((tag) => !tag.startsWith('localhost/minicri/pause:')), [], 'no image recorded');
  assert.equal(await threads(pid), atStart + 2, 'its two unpack workers are up');

  const ref = `${registry.host}/test/after-warm-up:1`;
  const { image_ref } = await daemon.client.image.call('PullImage', { image: { image: ref } });
  assert.equal(image_ref, image.configDigest);
  assert.equal(await threads(pid), atStart + 2, 'pulled on them, no other worker started');

  assert.doesNotMatch(plain.log(), /pull path warmed up/, 'off, no warm-up');
  assert.equal(await threads(plain.process.pid!), plainAtStart, 'nor its workers');
});
