import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { execa } from 'execa';
import { Images } from '../../../oci/image/images.js';
import { silentLogger } from '../../../core/log.js';
import { MemoryImageRepository } from '../../support/image-repo.js';

const config = { entrypoint: ['/x'], cmd: [], env: [], workingDir: '', user: '', exposedPorts: [], volumes: [], stopSignal: '', labels: {} };

test('reopening after a crash drops half-done work and keeps images and root filesystems', async (t) => {
  const rootDir = await mkdtemp(join(tmpdir(), 'minicri-image-recovery-'));
  const repo = new MemoryImageRepository();
  let images = await Images.open({ rootDir, repo, registries: { mirrors: {}, insecure: [] }, log: silentLogger });
  t.after(async () => {
    await images.removeRootfs('survivor').catch(() => undefined);
    await rm(rootDir, { recursive: true, force: true });
  });
  const r = await images.importLocal('local/x:1', [{ path: '/x', data: 'x' }], config);
  const fs = await images.prepareRootfs('survivor', r.id);
  await writeFile(join(fs.path, 'written-by-container'), 'data');

  // What a crash mid-pull or mid-prepare leaves behind.
  const orphan = 'f'.repeat(64);
  await mkdir(join(rootDir, 'tmp', 'layer-0123'), { recursive: true });
  await writeFile(join(rootDir, 'tmp', 'blob-0123'), 'partial');
  await writeFile(join(rootDir, 'blobs', 'sha256', orphan), 'complete but unreferenced');
  await mkdir(join(rootDir, 'layers', orphan));
  await mkdir(join(rootDir, 'rootfs', 'half-made'));

  images = await Images.open({ rootDir, repo, registries: { mirrors: {}, insecure: [] }, log: silentLogger });
  assert.deepEqual(await readdir(join(rootDir, 'tmp')), []);
  assert.ok(!(await readdir(join(rootDir, 'blobs', 'sha256'))).includes(orphan));
  assert.deepEqual(await readdir(join(rootDir, 'layers')), r.layers.map((l) => l.slice(7)));
  assert.deepEqual((await images.listRootfs()).map((x) => [x.key, x.imageId, x.mounted]), [['survivor', r.id, true]]);
  assert.deepEqual(images.list().map((x) => x.id), [r.id]);
  assert.deepEqual((await readdir(fs.path)).sort(), ['written-by-container', 'x']);

  // After a reboot the mount is gone but the container's upper dir is not: preparing again remounts it.
  await execa('umount', [fs.path]);
  assert.equal((await images.listRootfs())[0]?.mounted, false);
  const again = await images.prepareRootfs('survivor', r.id);
  assert.ok(again.mounted);
  assert.deepEqual((await readdir(again.path)).sort(), ['written-by-container', 'x']);
  await assert.rejects(images.prepareRootfs('survivor', 'local/y:1'), /not found/);
});
