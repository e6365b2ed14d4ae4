// A pull that fills the disk: RESOURCE_EXHAUSTED naming where, no partial blob or layer left, and the
// daemon goes on serving (a smaller image pulls fine afterwards).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { execa } from 'execa';
import { makeDaemonDirs, removeDirs, TestDaemon, type DaemonDirs } from '../../support/daemon.js';
import { hostCheck } from '../../support/pod-daemon.js';
import { startRegistry, type TestRegistry } from '../../support/registry.js';
import { buildImage, busyboxLayer, pushImage } from '../../support/test-images.js';

/** Every file under the image store, as relative paths (the sqlite files aside). */
function storeFiles(dir: string): string[] {
  return (readdirSync(`${dir}/images`, { recursive: true }) as string[]).filter((p) => !p.startsWith('l/')).sort();
}

// Daemons, pods and pulls of this file leave nothing on the host.
hostCheck('the disk full test');

describe('disk full during a pull', () => {
  let registry: TestRegistry;
  let dirs: DaemonDirs;
  let daemon: TestDaemon;
  before(async () => {
    registry = await startRegistry();
    // Random bytes do not compress: the layer is as large on the wire as on disk.
    await pushImage(registry, 'test/huge', ['1'], await buildImage([{ entries: [{ name: 'blob', data: randomBytes(24 * 1024 * 1024) }] }]));
    await pushImage(registry, 'test/small', ['1'], await buildImage([await busyboxLayer()]));
    dirs = makeDaemonDirs();
    mkdirSync(dirs.rootDir, { recursive: true });
    await execa('mount', ['-t', 'tmpfs', '-o', 'size=16m', 'minicri-test-full', dirs.rootDir]);
    daemon = await TestDaemon.start(dirs);
  });
  after(async () => {
    await daemon.stop();
    await execa('umount', [dirs.rootDir], { reject: false });
    removeDirs(dirs);
    await registry.stop();
  });

  it('refuses with RESOURCE_EXHAUSTED naming the full filesystem and leaves no partial blob or layer', async () => {
    const before = storeFiles(dirs.rootDir);
    await assert.rejects(daemon.client.image.call('PullImage', { image: { image: `${registry.host}/test/huge:1` } }), (err: grpc.ServiceError) => {
      assert.equal(err.code, grpc.status.RESOURCE_EXHAUSTED, err.details);
      assert.match(err.details, new RegExp(`no space left on the device holding ${dirs.rootDir}`));
      return true;
    });
    assert.deepEqual(storeFiles(dirs.rootDir), before, 'the store holds exactly what it held before');
    const { image_ref } = await daemon.client.image.call('PullImage', { image: { image: `${registry.host}/test/small:1` } });
    assert.match(image_ref, /^sha256:/);
  });
});
