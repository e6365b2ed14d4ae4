// kill -9 in the middle of PullImage: after a restart the image store holds exactly what its image records
// explain (no temp file, no blob or layer of the cut-off pull, no pull intent), and the same pull then
// succeeds and the image runs a container.
import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { pushBusybox } from '../../support/busybox-image.js';
import { makeDaemonDirs, removeDirs, TestDaemon, type DaemonDirs } from '../../support/daemon.js';
import { testNetwork } from '../../support/pod-daemon.js';
import { containerConfig, podConfig } from '../../support/pods.js';
import { startRegistry, type TestRegistry } from '../../support/registry.js';

/** Rows of one kind in the daemon's state store (read beside the running daemon; WAL allows it). */
function rows<T>(dirs: DaemonDirs, kind: string): T[] {
  const db = new Database(`${dirs.rootDir}/minicri.db`, { readonly: true });
  try {
    return (db.prepare('SELECT body FROM records WHERE kind = ?').all(kind) as { body: string }[]).map((r) => JSON.parse(r.body) as T);
  } finally {
    db.close();
  }
}

const names = async (dir: string, prefix = '') => (await readdir(dir).catch(() => [] as string[])).map((n) => `${prefix}${n}`).sort();

/** Blobs and layers on disk that no image record names. */
async function unexplained(dirs: DaemonDirs): Promise<string[]> {
  const keep = new Set(rows<{ blobs: string[]; layers: string[] }>(dirs, 'image').flatMap((r) => [...r.blobs, ...r.layers]));
  const onDisk = [...await names(`${dirs.rootDir}/images/blobs/sha256`, 'sha256:'), ...await names(`${dirs.rootDir}/images/layers`, 'sha256:')];
  return onDisk.filter((d) => !keep.has(d));
}

describe('crash during PullImage', () => {
  let registry: TestRegistry;
  let image: string;
  // Registered before the network's: the registry has stopped when the host is checked.
  after(() => registry?.stop());
  const network = testNetwork(81, 'the pull crash tests');
  before(async () => {
    registry = await startRegistry();
    image = await pushBusybox(registry, 'pullcrash');
  });

  for (const point of ['pull-manifest-stored', 'pull-blob-stored', 'pull-layer-unpacked']) {
    it(`leaves the image store as if the pull never started when the daemon dies at ${point}`, async () => {
      const { net } = network;
      // The blob is stored only where layer blobs are kept.
      const dirs = makeDaemonDirs(point === 'pull-blob-stored' ? 'keep_layer_blobs = true' : '', net);
      let daemon = await TestDaemon.start(dirs, { MINICRI_TEST_CRASH_AT: point });
      try {
        await assert.rejects(daemon.client.image.call('PullImage', { image: { image } }));
        assert.equal(await daemon.exited, -1, 'the daemon was killed');
        assert.equal(rows(dirs, 'image-pull').length, 1, 'the pull recorded its intent before it wrote');
        assert.ok((await unexplained(dirs)).length > 0, 'the crash left something of the pull behind');

        daemon = await TestDaemon.start(dirs);
        assert.deepEqual(await names(`${dirs.rootDir}/images/tmp`), [], 'no temp file');
        assert.deepEqual(await unexplained(dirs), [], 'no blob or layer that no image references');
        assert.deepEqual(rows(dirs, 'image-pull'), [], 'no pull intent left');
        assert.match(daemon.log(), /a pull was cut off by a crash/);

        const { image_ref: id } = await daemon.client.image.call('PullImage', { image: { image } });
        assert.match(id, /^sha256:/);
        const config = podConfig(`pullcrash-${point}`);
        const { pod_sandbox_id: pod } = await daemon.client.runtime.call('RunPodSandbox', { config });
        try {
          const { container_id: ctr } = await daemon.client.runtime.call('CreateContainer', {
            pod_sandbox_id: pod, sandbox_config: config, config: containerConfig('app', image, ['sleep', '600']),
          });
          await daemon.client.runtime.call('StartContainer', { container_id: ctr });
          assert.equal((await daemon.client.runtime.call('ContainerStatus', { container_id: ctr })).status!.state, 'CONTAINER_RUNNING');
        } finally {
          await daemon.client.runtime.call('StopPodSandbox', { pod_sandbox_id: pod });
          await daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: pod });
        }
        assert.deepEqual(await net.allocatedIps(), []);
      } finally {
        await daemon.stop();
        removeDirs(dirs);
      }
    });
  }
});
