// The ImageService as kubelet drives it: pulls from a real local registry (plain, mirrored, with
// credentials), list and status (the built-in pause included, pinned), remove and fs info.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { makeDaemonDirs, removeDirs, TestDaemon, type DaemonDirs } from '../../support/daemon.js';
import { hostCheck } from '../../support/pod-daemon.js';
import { startRegistry, type TestRegistry } from '../../support/registry.js';
import { pushBusybox } from '../../support/busybox-image.js';
import { podConfig } from '../../support/pods.js';
import { buildImage, busyboxLayer, pushImage, type BuiltImage } from '../../support/test-images.js';

const isCode = (code: grpc.status, pattern?: RegExp) => (err: grpc.ServiceError) => err.code === code && (!pattern || pattern.test(err.details));

// Daemons, pods and pulls of this file leave nothing on the host.
hostCheck('the image RPC tests');

describe('image service RPCs', () => {
  let registry: TestRegistry;
  let secured: TestRegistry;
  let image: BuiltImage;
  let dirs: DaemonDirs;
  let daemon: TestDaemon;

  before(async () => {
    [registry, secured] = await Promise.all([startRegistry(), startRegistry({ auth: { kind: 'htpasswd', username: 'kube', password: 's3cret' } })]);
    image = await buildImage([await busyboxLayer(), { entries: [{ name: 'app/', type: 'directory' }, { name: 'app/hello', data: 'hello\n' }] }],
      { User: '1000', Cmd: ['/bin/sh'], Env: ['A=1'], StopSignal: 'SIGQUIT' });
    await pushImage(registry, 'test/app', ['1', 'latest'], image);
    await pushImage(secured, 'private/app', ['1'], image);
    dirs = makeDaemonDirs(`[registries.mirrors."registry.k8s.io"]\nendpoints = ["http://${registry.host}"]\nmirrors_only = true\n`);
    daemon = await TestDaemon.start(dirs);
  });
  after(async () => {
    await daemon.stop();
    removeDirs(dirs);
    await Promise.all([registry.stop(), secured.stop()]);
  });

  it('lists the built-in pause as a pinned image from the start', async () => {
    const { images } = await daemon.client.image.call('ListImages', {});
    const pause = images.find((i) => i.repo_tags.some((t) => t.startsWith('localhost/minicri/pause:')));
    assert.ok(pause, JSON.stringify(images));
    assert.equal(pause.pinned, true);
  });

  it('pulls by tag, answers the config digest, and keeps every tag on one image', async () => {
    const ref = `${registry.host}/test/app:1`;
    const { image_ref } = await daemon.client.image.call('PullImage', { image: { image: ref } });
    assert.equal(image_ref, image.configDigest);
    await daemon.client.image.call('PullImage', { image: { image: `${registry.host}/test/app:latest` } });
    const status = await daemon.client.image.call('ImageStatus', { image: { image: ref }, verbose: true });
    assert.equal(status.image!.id, image.configDigest);
    assert.deepEqual([...status.image!.repo_tags].sort(), [`${registry.host}/test/app:1`, `${registry.host}/test/app:latest`]);
    assert.deepEqual(status.image!.repo_digests, [`${registry.host}/test/app@${image.manifestDigest}`]);
    assert.equal(status.image!.uid?.value, '1000');
    assert.equal(status.image!.pinned, false);
    assert.ok(Number(status.image!.size) > 0);
    assert.equal(JSON.parse(status.info.info).config.stopSignal, 'SIGQUIT');
    const listed = await daemon.client.image.call('ListImages', { filter: { image: { image: `${registry.host}/test/app:latest` } } });
    assert.deepEqual(listed.images.map((i) => i.id), [image.configDigest]);
  });

  it('pulls by digest', async () => {
    const { image_ref } = await daemon.client.image.call('PullImage', { image: { image: `${registry.host}/test/app@${image.manifestDigest}` } });
    assert.equal(image_ref, image.configDigest);
  });

  it('serves a mirrored registry from its mirror only, under the name asked for', async () => {
    const { image_ref } = await daemon.client.image.call('PullImage', { image: { image: 'registry.k8s.io/test/app:1' } });
    assert.equal(image_ref, image.configDigest);
    const status = await daemon.client.image.call('ImageStatus', { image: { image: 'registry.k8s.io/test/app:1' } });
    assert.ok(status.image!.repo_tags.includes('registry.k8s.io/test/app:1'));
  });

  it('pulls with credentials and passes on the registry refusal without them', async () => {
    const ref = `${secured.host}/private/app:1`;
    await assert.rejects(daemon.client.image.call('PullImage', { image: { image: ref } }), (err: grpc.ServiceError) => /401|unauthorized|authentication/i.test(err.details));
    const { image_ref } = await daemon.client.image.call('PullImage', { image: { image: ref }, auth: { username: 'kube', password: 's3cret' } });
    assert.equal(image_ref, image.configDigest);
  });

  it('answers absent images with an empty status, and bad pulls with precise codes', async () => {
    const absent = await daemon.client.image.call('ImageStatus', { image: { image: `${registry.host}/test/none:1` } });
    assert.equal(absent.image, null);
    await assert.rejects(daemon.client.image.call('PullImage', { image: { image: 'UPPER/Case::bad' } }), isCode(grpc.status.INVALID_ARGUMENT, /UPPER\/Case::bad/));
    await assert.rejects(daemon.client.image.call('PullImage', { image: { image: `${registry.host}/test/app:nope` } }), isCode(grpc.status.NOT_FOUND, /test\/app:nope/));
  });

  it('refuses an ImageSpec naming a runtime handler that is not configured, and takes the configured one', async () => {
    const ref = `${registry.host}/test/app:1`;
    const unknown = isCode(grpc.status.INVALID_ARGUMENT, /^runtime handler "kata" is not configured \(have: runc\)$/);
    await assert.rejects(daemon.client.image.call('PullImage', { image: { image: ref, runtime_handler: 'kata' } }), unknown);
    await assert.rejects(daemon.client.image.call('ImageStatus', { image: { image: ref, runtime_handler: 'kata' } }), unknown);
    await assert.rejects(daemon.client.image.call('ListImages', { filter: { image: { image: ref, runtime_handler: 'kata' } } }), unknown);
    await assert.rejects(daemon.client.image.call('RemoveImage', { image: { image: ref, runtime_handler: 'kata' } }), unknown);
    assert.equal((await daemon.client.image.call('ImageStatus', { image: { image: ref, runtime_handler: 'runc' } })).image?.id, image.configDigest,
      'the refused RemoveImage removed nothing');
    const { image_ref } = await daemon.client.image.call('PullImage', { image: { image: ref, runtime_handler: 'runc' } });
    assert.equal(image_ref, image.configDigest);
  });

  it('removes by one tag the image with all its tags and digests (CRI 1.36), idempotently', async () => {
    const names = [`${registry.host}/test/app:1`, `${registry.host}/test/app:latest`, 'registry.k8s.io/test/app:1', `${secured.host}/private/app:1`];
    const before = await daemon.client.image.call('ImageStatus', { image: { image: image.configDigest } });
    assert.deepEqual([...before.image!.repo_tags].sort(), [...names].sort());
    await daemon.client.image.call('RemoveImage', { image: { image: `${registry.host}/test/app:latest` } });
    for (const name of [image.configDigest, ...names, ...before.image!.repo_digests]) {
      assert.equal((await daemon.client.image.call('ImageStatus', { image: { image: name } })).image, null, name);
    }
    assert.ok(!(await daemon.client.image.call('ListImages', {})).images.some((i) => i.id === image.configDigest));
    await daemon.client.image.call('RemoveImage', { image: { image: `${registry.host}/test/app:latest` } });
    await daemon.client.image.call('RemoveImage', { image: { image: image.configDigest } });
  });

  it('reports the bytes and inodes the image store uses', async () => {
    const { image_filesystems: [fs] } = await daemon.client.image.call('ImageFsInfo', {});
    assert.ok(fs);
    assert.ok(fs.fs_id!.mountpoint.startsWith(dirs.rootDir), fs.fs_id!.mountpoint);
    assert.ok(Number(fs.used_bytes!.value) > 0);
    assert.ok(Number(fs.inodes_used!.value) > 0);
  });
});

describe('a configured pause image', () => {
  it('is pulled on the first sandbox and pinned, so kubelet image GC keeps it', async () => {
    const registry = await startRegistry();
    const pause = await pushBusybox(registry, 'pause', { Cmd: ['sleep', '3600'] });
    const dirs = makeDaemonDirs(`pause_image = "${pause}"`);
    const daemon = await TestDaemon.start(dirs);
    try {
      assert.equal((await daemon.client.image.call('ImageStatus', { image: { image: pause } })).image, null, 'not pulled before it is needed');
      // A host-network pod needs no CNI network.
      const config = podConfig('configured-pause', (c) => { c.linux!.security_context!.namespace_options!.network = 'NODE'; });
      const { pod_sandbox_id: id } = await daemon.client.runtime.call('RunPodSandbox', { config });
      assert.equal((await daemon.client.image.call('ImageStatus', { image: { image: pause } })).image?.pinned, true);
      await daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: id });
    } finally {
      await daemon.stop();
      removeDirs(dirs);
      await registry.stop();
    }
  });
});
