import assert from 'node:assert/strict';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { InvalidArgument } from '../../../core/errors.js';
import { imageEnv } from '../../support/image-env.js';

const pauseConfig = {
  entrypoint: ['/pause'], cmd: [], env: ['PATH=/'], workingDir: '/', user: '65535:65535', exposedPorts: [], volumes: [], stopSignal: 'SIGINT', labels: {},
};

test('a local image (the pause image) is imported, pinned, listed and runs as a rootfs', async (t) => {
  const { images, requests } = await imageEnv(t);
  const files = [{ path: '/pause', source: '/bin/busybox', mode: 0o755 }, { path: '/etc/hostname', data: 'pause\n' }];
  const r = await images.importLocal('registry.k8s.io/pause:3.10', files, pauseConfig, { pinned: true });
  assert.equal(r.pinned, true);
  assert.deepEqual(r.repoTags, ['registry.k8s.io/pause:3.10']);
  assert.deepEqual(r.config, pauseConfig);
  const again = await images.importLocal('registry.k8s.io/pause:3.10', files, pauseConfig, { pinned: true });
  assert.equal(again.id, r.id, 'deterministic');
  assert.deepEqual(images.list().map((x) => x.id), [r.id]);
  assert.equal(images.status('registry.k8s.io/pause:3.10')?.pinned, true);
  // Already present: pulling it by name goes nowhere near a registry as long as callers check status first.
  assert.deepEqual(requests, []);

  const fs = await images.prepareRootfs('pause-local', 'registry.k8s.io/pause:3.10');
  t.after(() => images.removeRootfs('pause-local'));
  const st = await stat(join(fs.path, 'pause'));
  assert.equal(st.mode & 0o777, 0o755);
  assert.equal(st.size, (await stat('/bin/busybox')).size);
  assert.equal(await readFile(join(fs.path, 'etc/hostname'), 'utf8'), 'pause\n');
  await assert.rejects(images.importLocal('x@sha256:' + 'a'.repeat(64), files, pauseConfig), InvalidArgument);
  await assert.rejects(images.importLocal('x', [{ path: 'rel', data: '' }], pauseConfig), InvalidArgument);
});

test('a one-layer image with the mount points becomes a shared read-only root; otherwise an overlay', async (t) => {
  const { images } = await imageEnv(t);
  const dirs = ['/proc', '/dev', '/sys'];
  const withDirs = await images.importLocal('local/ro:1', [{ path: '/pause', data: 'x', mode: 0o755 }, ...dirs.map((path) => ({ path, directory: true }))], pauseConfig);
  const without = await images.importLocal('local/rw:1', [{ path: '/pause', data: 'x', mode: 0o755 }, { path: '/proc', directory: true }], pauseConfig);

  const shared = await images.prepareRootfs('ro-1', withDirs.id, { readOnlyWith: dirs });
  t.after(() => images.removeRootfs('ro-1'));
  assert.equal(shared.readOnly, true);
  assert.equal(shared.mount, undefined);
  assert.deepEqual((await readdir(shared.path)).sort(), ['dev', 'pause', 'proc', 'sys']);
  assert.equal((await images.prepareRootfs('ro-1', withDirs.id)).path, shared.path, 'idempotent');
  // Its layer is kept while the rootfs exists, even with the image gone, and goes with the rootfs.
  await images.remove(withDirs.id);
  assert.equal((await readdir(shared.path)).length, 4);
  await images.removeRootfs('ro-1');
  await images.gc();
  await assert.rejects(stat(shared.path), { code: 'ENOENT' });

  const overlay = await images.prepareRootfs('rw-1', without.id, { readOnlyWith: dirs });
  t.after(() => images.removeRootfs('rw-1'));
  assert.equal(overlay.readOnly, false);
  assert.equal(overlay.mount?.type, 'overlay');
  assert.ok(overlay.mounted);
  assert.ok(overlay.path.endsWith('/merged'));
});
