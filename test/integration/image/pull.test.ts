import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { constants, gzipSync, zstdCompressSync } from 'node:zlib';
import { NotFound } from '../../../core/errors.js';
import { imageEnv } from '../../support/image-env.js';
import { startRegistry, type TestRegistry } from '../../support/registry.js';
import {
  buildImage, busyboxLayer, pushBlob, pushImage, pushIndex, pushManifest, registryBlobFile, sha256, tarball, type BuiltImage,
} from '../../support/test-images.js';

describe('image pull from a local registry', () => {
  let reg: TestRegistry;
  let base: BuiltImage;
  let app: BuiltImage;

  before(async () => {
    reg = await startRegistry();
    const bb = await busyboxLayer();
    base = await buildImage([bb], { Cmd: ['sh'], Env: ['PATH=/bin'], User: '1000:1000', WorkingDir: '/tmp', Labels: { a: 'b' }, ExposedPorts: { '80/tcp': {} }, StopSignal: 'SIGINT' });
    app = await buildImage([bb, { entries: [{ name: 'app/', type: 'directory' }, { name: 'app/hello', data: 'hi\n' }], compression: 'zstd' },
      { entries: [{ name: 'app/plain', data: 'plain\n' }], compression: 'none' }], { Entrypoint: ['/app/hello'], User: 'nobody' });
    await pushImage(reg, 'test/base', ['1.0', 'latest'], base);
    await pushImage(reg, 'test/app', ['v1'], app);
  });
  after(async () => { await reg?.stop(); });

  test('by tag, by digest, several tags, second pull downloads nothing', async (t) => {
    const { images, blobRequests } = await imageEnv(t);
    const name = `${reg.host}/test/base`;
    const r = await images.pull(`${name}:1.0`);
    assert.equal(r.id, base.configDigest);
    assert.deepEqual(r.repoTags, [`${name}:1.0`]);
    assert.deepEqual(r.repoDigests, [`${name}@${base.manifestDigest}`]);
    assert.deepEqual(r.layers, base.diffIds);
    assert.deepEqual(r.config, {
      entrypoint: [], cmd: ['sh'], env: ['PATH=/bin'], workingDir: '/tmp', user: '1000:1000', exposedPorts: ['80/tcp'],
      volumes: [], stopSignal: 'SIGINT', labels: { a: 'b' },
    });
    const blobsFirst = blobRequests().length;
    assert.equal(blobsFirst, 2, 'config and one layer');

    const r2 = await images.pull(name);
    assert.equal(r2.id, r.id);
    assert.deepEqual(r2.repoTags.sort(), [`${name}:1.0`, `${name}:latest`]);
    const r3 = await images.pull(`${name}@${base.manifestDigest}`);
    assert.equal(r3.id, r.id);
    assert.equal(blobRequests().length, blobsFirst, 'no blob downloaded again');
    assert.equal(images.list().length, 1);
    assert.equal(images.status(`${name}:latest`)?.id, r.id);
    assert.equal(images.status(r.id)?.id, r.id);
    assert.equal(images.status(r.id.slice(7, 19))?.id, r.id, 'short id');
    assert.equal(images.status(`${name}@${base.manifestDigest}`)?.id, r.id);
    assert.equal(images.status(`${name}:nope`), undefined);
  });

  test('a layer\'s compressed blob is checked but kept only with keepLayerBlobs', async (t) => {
    const name = `${reg.host}/test/base:1.0`;
    const stored = async (keepLayerBlobs: boolean) => {
      const { images, rootDir } = await imageEnv(t, undefined, { keepLayerBlobs });
      await images.pull(name);
      return { blobs: (await readdir(join(rootDir, 'blobs', 'sha256'))).sort(), tmp: await readdir(join(rootDir, 'tmp')) };
    };
    const layer = base.layerDigests[0]!.slice(7);
    const config = base.configDigest.slice(7);
    const manifest = base.manifestDigest.slice(7);
    assert.deepEqual(await stored(false), { blobs: [config, manifest].sort(), tmp: [] });
    assert.deepEqual(await stored(true), { blobs: [config, layer, manifest].sort(), tmp: [] });
  });

  test('a digest pull whose manifest is stored but whose layer went missing fetches just the layer', async (t) => {
    const { images, rootDir, blobRequests, requests } = await imageEnv(t);
    const name = `${reg.host}/test/base`;
    await images.pull(`${name}:1.0`);
    await rm(join(rootDir, 'layers', base.diffIds[0]!.slice(7)), { recursive: true });
    const before = requests.length;
    await images.pull(`${name}@${base.manifestDigest}`);
    assert.deepEqual(requests.slice(before).map((u) => u.slice(reg.url.length)), [
      `/v2/test/base/manifests/${base.manifestDigest}`, `/v2/test/base/blobs/${base.layerDigests[0]}`,
    ]);
    assert.equal(blobRequests().length, 3);
  });

  test('with layer blobs kept, a layer that went missing is unpacked again from its blob, fetching nothing', async (t) => {
    const { images, rootDir, requests } = await imageEnv(t, undefined, { keepLayerBlobs: true });
    const name = `${reg.host}/test/base`;
    await images.pull(`${name}:1.0`);
    const layerDir = join(rootDir, 'layers', base.diffIds[0]!.slice(7));
    await rm(layerDir, { recursive: true });
    const before = requests.length;
    await images.pull(`${name}@${base.manifestDigest}`);
    assert.deepEqual(requests.slice(before).map((u) => u.slice(reg.url.length)), [`/v2/test/base/manifests/${base.manifestDigest}`]);
    assert.ok((await readdir(layerDir)).length > 0, 'the layer is back');
  });

  test('concurrent pulls fetch each blob once; zstd and uncompressed layers unpack', async (t) => {
    const { images, blobRequests } = await imageEnv(t);
    const [a, b, c] = await Promise.all([
      images.pull(`${reg.host}/test/app:v1`), images.pull(`${reg.host}/test/app:v1`), images.pull(`${reg.host}/test/base:1.0`),
    ]);
    assert.equal(a.id, b.id);
    assert.notEqual(a.id, c.id);
    const blobs = blobRequests().map((u) => u.slice(u.lastIndexOf('/') + 1));
    assert.equal(new Set(blobs).size, blobs.length, `each blob fetched once: ${blobs.join(' ')}`);
    // app: config + 3 layers; base: its config (its layer is app's first layer).
    assert.equal(blobs.length, 5);
    const fs = await images.prepareRootfs('pull-app', a.id);
    t.after(() => images.removeRootfs('pull-app'));
    assert.deepEqual((await readdir(join(fs.path, 'app'))).sort(), ['hello', 'plain']);
    assert.deepEqual((await readdir(join(fs.path, 'bin'))).sort(), ['busybox', 'cat', 'echo', 'ls', 'sh']);
  });

  test('image index resolves to linux/amd64', async (t) => {
    const { images } = await imageEnv(t);
    const arm = await buildImage([{ entries: [{ name: 'arch', data: 'arm64' }] }], {}, { os: 'linux', architecture: 'arm64' });
    const amd = await buildImage([{ entries: [{ name: 'arch', data: 'amd64' }] }], {}, { os: 'linux', architecture: 'amd64' });
    const v3 = await buildImage([{ entries: [{ name: 'arch', data: 'amd64v3' }] }], {}, { os: 'linux', architecture: 'amd64', variant: 'v3' });
    const win = await buildImage([{ entries: [{ name: 'arch', data: 'windows' }] }], {}, { os: 'windows', architecture: 'amd64' });
    const digest = await pushIndex(reg, 'test/multi', 'v1', [
      { image: arm, platform: { os: 'linux', architecture: 'arm64' } },
      { image: win, platform: { os: 'windows', architecture: 'amd64' } },
      { image: v3, platform: { os: 'linux', architecture: 'amd64', variant: 'v3' } },
      { image: amd, platform: { os: 'linux', architecture: 'amd64' } },
    ]);
    const r = await images.pull(`${reg.host}/test/multi:v1`);
    assert.equal(r.id, amd.configDigest);
    assert.deepEqual(r.repoDigests, [`${reg.host}/test/multi@${digest}`]);
    await pushIndex(reg, 'test/armonly', 'v1', [{ image: arm, platform: { os: 'linux', architecture: 'arm64' } }]);
    await assert.rejects(images.pull(`${reg.host}/test/armonly:v1`), (e: Error) => e instanceof NotFound && /linux\/amd64.*linux\/arm64/.test(e.message));
  });

  test('unknown image or tag is NotFound naming reference and registry', async (t) => {
    const { images } = await imageEnv(t);
    await assert.rejects(images.pull(`${reg.host}/test/base:missing`), (e: Error) =>
      e instanceof NotFound && e.message.includes(`${reg.host}/test/base:missing`) && e.message.includes(`registry ${reg.host}`));
    await assert.rejects(images.pull(`${reg.host}/nothing/here`), NotFound);
  });

  // A small layer unpacks on the main thread, a larger one on the unpack worker: both check the blob's digest.
  for (const [kind, data] of [['small', 'x'.repeat(1000)], ['large', randomBytes(300_000)]] as const) {
    test(`a corrupt blob (${kind} layer) fails the pull and stores nothing`, async (t) => {
      const { images, rootDir } = await imageEnv(t);
      const img = await buildImage([{ entries: [{ name: 'x', data }], compression: 'gzip' }], { Cmd: ['x'] });
      await pushImage(reg, `test/corrupt-${kind}`, ['v1'], img);
      const file = registryBlobFile(reg, img.layerDigests[0]!);
      const good = img.blobs.get(img.layerDigests[0]!)!;
      const bad = Buffer.from(good);
      bad[bad.length - 5] ^= 0xff;
      await writeFile(file, bad);
      await assert.rejects(images.pull(`${reg.host}/test/corrupt-${kind}:v1`), /digest .* not sha256:.*corrupt/);
      assert.deepEqual(await readdir(join(rootDir, 'blobs', 'sha256')), []);
      assert.deepEqual(await readdir(join(rootDir, 'layers')), []);
      assert.deepEqual(await readdir(join(rootDir, 'tmp')), []);
      assert.equal(images.list().length, 0);
    });
  }

  // A decompressor stops at the end of its stream: gunzip at zeros after a gzip member, zstd at anything after a
  // frame. The bytes after it still count. The image's layer blob is a valid one followed by a MiB of such
  // bytes; served instead is another compression of the same tar, padded to the same size: the layer and its
  // diff id are right, and only the blob's digest, known once its last byte is read, tells them apart.
  for (const compression of ['gzip', 'zstd'] as const) {
    for (const [kind, data] of [['small', 'a few words\n'.repeat(2000)], ['large', randomBytes(300_000)]] as const) {
      test(`a blob whose layer ends before its bytes do is checked to its end (${compression}, ${kind} layer)`, async (t) => {
        const { images, rootDir } = await imageEnv(t, undefined, { keepLayerBlobs: true });
        const entries = [{ name: 'x', data }];
        const img = await buildImage([{ entries, compression }], { Cmd: ['x'] });
        const pad = (b: Buffer, size: number) => Buffer.concat([b, Buffer.alloc(size - b.length, compression === 'gzip' ? 0 : 0xff)]);
        const valid = img.blobs.get(img.layerDigests[0]!)!;
        const declared = pad(valid, valid.length + (1 << 20));
        const manifest = JSON.parse(img.manifest.toString()) as { layers: Array<{ digest: string; size: number }> };
        manifest.layers[0] = { ...manifest.layers[0]!, digest: sha256(declared), size: declared.length };
        const repository = `test/padded-${compression}-${kind}`;
        await pushBlob(reg, repository, declared);
        await pushBlob(reg, repository, img.config);
        await pushManifest(reg, repository, 'v1', Buffer.from(JSON.stringify(manifest)), 'application/vnd.oci.image.manifest.v1+json');
        const other = compression === 'gzip'
          ? gzipSync(await tarball(entries), { level: 9 })
          : zstdCompressSync(await tarball(entries), { params: { [constants.ZSTD_c_compressionLevel]: 19 } });
        await writeFile(registryBlobFile(reg, sha256(declared)), pad(other, declared.length));
        await assert.rejects(images.pull(`${reg.host}/${repository}:v1`), /digest .* not sha256:.*corrupt/);
        assert.deepEqual(await readdir(join(rootDir, 'blobs', 'sha256')), [], 'no blob stored');
        assert.deepEqual(await readdir(join(rootDir, 'layers')), []);
        assert.deepEqual(await readdir(join(rootDir, 'tmp')), []);
      });
    }
  }

  test('list, status, remove by one tag (the image with all its tags) and by id keep shared layers; fsInfo counts', async (t) => {
    const { images, rootDir } = await imageEnv(t);
    const b = await images.pull(`${reg.host}/test/base:1.0`);
    await images.pull(`${reg.host}/test/base:latest`);
    const a = await images.pull(`${reg.host}/test/app:v1`);
    assert.equal(images.list().length, 2);
    assert.deepEqual(images.list({ image: `${reg.host}/test/app:v1` }).map((r) => r.id), [a.id]);
    const info1 = await images.fsInfo();
    assert.equal(info1.mountpoint, rootDir);
    assert.ok(info1.usedBytes > 500_000 && info1.inodesUsed > 10, JSON.stringify(info1));

    assert.deepEqual(images.status(b.id)?.repoTags, [`${reg.host}/test/base:1.0`, `${reg.host}/test/base:latest`]);
    await images.remove(`${reg.host}/test/base:1.0`);
    assert.equal(images.status(b.id), undefined, 'one tag removes the image with its other tags');
    assert.equal(images.status(`${reg.host}/test/base:latest`), undefined);
    await images.remove(b.id); // idempotent
    await images.remove(`${reg.host}/test/base:latest`);
    // The busybox layer is shared with app and must stay.
    assert.deepEqual((await readdir(join(rootDir, 'layers'))).sort(), a.layers.map((l) => l.slice(7)).sort());
    const blobs = await readdir(join(rootDir, 'blobs', 'sha256'));
    assert.ok(!blobs.includes(b.id.slice(7)), 'config blob of removed image deleted');
    const info2 = await images.fsInfo();
    assert.ok(info2.usedBytes < info1.usedBytes);

    await images.remove(`${reg.host}/test/app:v1`);
    assert.equal(images.list().length, 0);
    assert.deepEqual(await readdir(join(rootDir, 'layers')), []);
    assert.deepEqual(await readdir(join(rootDir, 'blobs', 'sha256')), []);
  });

  test('an image used by a rootfs keeps its layers after removal; in-use images cannot be removed', async (t) => {
    let used = '';
    const { images, rootDir } = await imageEnv(t, undefined, { usedBy: (id) => (id === used ? 'container "app" (c0ffee): remove the container first' : undefined) });
    const a = await images.pull(`${reg.host}/test/app:v1`);
    used = a.id;
    await assert.rejects(images.remove(`${reg.host}/test/app:v1`), /is used by container "app" \(c0ffee\): remove the container first/);
    used = '';
    const fs = await images.prepareRootfs('keep-layers', a.id);
    await images.remove(a.id);
    assert.equal((await readdir(join(rootDir, 'layers'))).length, 3);
    assert.deepEqual((await readdir(join(fs.path, 'app'))).sort(), ['hello', 'plain']);
    await images.removeRootfs('keep-layers');
    await images.removeRootfs('keep-layers'); // idempotent
    await images.gc();
    assert.deepEqual(await readdir(join(rootDir, 'layers')), []);
  });

  test('status gives uid or username from the config', async (t) => {
    const { images } = await imageEnv(t);
    const { imageUser } = await import('../../../oci/image/images.js');
    const b = await images.pull(`${reg.host}/test/base:1.0`);
    const a = await images.pull(`${reg.host}/test/app:v1`);
    assert.deepEqual(imageUser(b.config.user), { uid: 1000 });
    assert.deepEqual(imageUser(a.config.user), { username: 'nobody' });
  });
});
