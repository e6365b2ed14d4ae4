// Where the writable layers live (split image and container filesystems, KEP-4191) and what they use.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { silentLogger } from '../../../core/log.js';
import { LayerStore } from '../../../oci/image/snapshot.js';
import { UsageCache } from '../../../oci/image/usage.js';
import { FailedPrecondition } from '../../../core/errors.js';
import { assertRootfsDirKept, filesystemsSplit, storageDirs } from '../../../oci/image/storage-dirs.js';
import { parseConfig } from '../../../server/config.js';

test('writable layers sit beside the images by default, and below writable_layers_dir when it is set', () => {
  assert.deepEqual(storageDirs({ root_dir: '/var/lib/minicri' }),
    { images: '/var/lib/minicri/images', writableLayers: '/var/lib/minicri/images', rootfs: '/var/lib/minicri/images/rootfs' });
  assert.deepEqual(storageDirs({ root_dir: '/var/lib/minicri', writable_layers_dir: '/mnt/containers' }),
    { images: '/var/lib/minicri/images', writableLayers: '/mnt/containers', rootfs: '/mnt/containers/rootfs' });
});

test('writable_layers_dir: unset by default, an absolute path when set', () => {
  assert.equal(parseConfig({}).writable_layers_dir, undefined);
  assert.equal(storageDirs(parseConfig({ writable_layers_dir: '/mnt/containers' })).rootfs, '/mnt/containers/rootfs');
  assert.throws(() => parseConfig({ writable_layers_dir: 'containers' }), /config key "writable_layers_dir": must be an absolute path/);
});

test('split only when the writable layers are on another device than the images', async () => {
  const base = await mkdtemp(join(tmpdir(), 'minicri-unit-'));
  try {
    await mkdir(join(base, 'root', 'images'), { recursive: true });
    await mkdir(join(base, 'layers'));
    assert.equal(await filesystemsSplit(storageDirs({ root_dir: join(base, 'root') })), false, 'the default');
    assert.equal(await filesystemsSplit(storageDirs({ root_dir: join(base, 'root'), writable_layers_dir: join(base, 'layers') })), false, 'another dir, same filesystem');
    // /proc is a filesystem of its own on every Linux host.
    assert.equal(await filesystemsSplit(storageDirs({ root_dir: join(base, 'root'), writable_layers_dir: '/proc' })), true);
    await assert.rejects(filesystemsSplit(storageDirs({ root_dir: join(base, 'root'), writable_layers_dir: join(base, 'absent') })), /ENOENT/);
  } finally {
    await rm(base, { recursive: true, force: true });
  }
});

test('root filesystems go to the writable layers dir; their use counts upper and work dirs, never the mounted view', async () => {
  const base = await mkdtemp(join(tmpdir(), 'minicri-unit-'));
  try {
    // A cache of no lifetime: every call sees what is there now.
    const store = new LayerStore(join(base, 'images'), join(base, 'images', 'tmp'), silentLogger, join(base, 'layers', 'rootfs'), new UsageCache({ maxAgeMs: 0 }));
    await store.init();
    assert.deepEqual(await store.writableUsage(), { bytes: 0, inodes: 0 });
    const { rootfs } = await store.reserveRootfs('c1', 'sha256:img', []);
    assert.equal(rootfs.path, join(base, 'layers', 'rootfs', 'c1', 'merged'));
    assert.deepEqual((await readdir(join(base, 'images'))).sort(), ['l', 'layers', 'tmp'], 'no rootfs in the image store');
    const empty = await store.writableUsage();
    assert.equal(empty.inodes, 2, 'the upper and work dirs themselves');
    const upper = join(base, 'layers', 'rootfs', 'c1', 'upper');
    await writeFile(join(upper, 'data'), Buffer.alloc(1 << 20, 1));
    await mkdir(join(upper, 'dir'));
    // What a mounted overlay shows (the image's files) is not the container's.
    await writeFile(join(rootfs.path, 'from-image'), Buffer.alloc(1 << 20, 1));
    const used = await store.writableUsage();
    assert.equal(used.inodes, empty.inodes + 2);
    assert.ok(used.bytes - empty.bytes >= 1 << 20 && used.bytes - empty.bytes < 2 << 20, String(used.bytes - empty.bytes));
    assert.deepEqual((await store.listRootfs()).map((r) => r.key), ['c1']);
    await store.removeRootfs('c1');
    assert.deepEqual(await store.writableUsage(), { bytes: 0, inodes: 0 });
  } finally {
    await rm(base, { recursive: true, force: true });
  }
});

test('a moved writable_layers_dir is refused while root filesystems are left in the old place', async () => {
  const base = await mkdtemp(join(tmpdir(), 'minicri-unit-'));
  try {
    const root = join(base, 'root');
    const moved = storageDirs({ root_dir: root, writable_layers_dir: join(base, 'layers') });
    const stayed = storageDirs({ root_dir: root });
    // A first start, or nothing left behind: fine.
    await assertRootfsDirKept(undefined, stayed, root);
    await assertRootfsDirKept(undefined, moved, root);
    await assertRootfsDirKept(moved.rootfs, moved, root);
    await mkdir(join(stayed.rootfs, 'c1'), { recursive: true });
    // An install from before the key existed had its root filesystems in the default place.
    await assert.rejects(assertRootfsDirKept(undefined, moved, root), (err: Error) => err instanceof FailedPrecondition && err.message.includes(stayed.rootfs) && err.message.includes(moved.rootfs));
    await assert.rejects(assertRootfsDirKept(stayed.rootfs, moved, root), FailedPrecondition);
    await assertRootfsDirKept(stayed.rootfs, stayed, root);
    await mkdir(join(moved.rootfs, 'c2'), { recursive: true });
    await assert.rejects(assertRootfsDirKept(moved.rootfs, stayed, root), /writable_layers_dir changed, but 1 container root filesystems are still in/);
  } finally {
    await rm(base, { recursive: true, force: true });
  }
});
