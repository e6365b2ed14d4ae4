// Recovery at start removes host objects of ours that no record explains, as `minicri doctor --repair`
// would: here a netns pin and a pod shm mount left by a crash between making them and writing the
// sandbox record. A live pod and a pin this daemon has no trace of (another daemon's) stay untouched.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { createPodNetns, podNetnsPaths, removePodNetns, type PodNetns } from '../../../netns/netns.js';
import { mountPodShm } from '../../../oci/runtime/pod/files.js';
import { makeDaemonDirs, removeDirs, unmountUnder, TestDaemon, type DaemonDirs } from '../../support/daemon.js';
import { testNetwork } from '../../support/pod-daemon.js';
import { podConfig } from '../../support/pods.js';

const mounted = async (path: string) => (await readFile('/proc/self/mounts', 'utf8')).split('\n').some((l) => l.split(' ')[1] === path);

describe('recovery sweeps unexplained pins and shm mounts', () => {
  let dirs: DaemonDirs;
  let foreign: PodNetns | undefined;
  const network = testNetwork(82, 'the recovery sweep test', {
    // Runs after the host check: whatever a failed run left in the test's own dirs goes, once reported.
    cleanup: async () => {
      if (foreign) await removePodNetns(foreign);
      await unmountUnder(dirs.base);
      removeDirs(dirs);
    },
  });

  it('removes a pin and an shm mount no record explains at start, and nothing else', async () => {
    const { net } = network;
    dirs = makeDaemonDirs('', net, { ownNetnsDir: true });
    const netnsDir = dirs.netnsDir!;
    let daemon = await TestDaemon.start(dirs);
    let kept: string | undefined;
    try {
      kept = (await daemon.client.runtime.call('RunPodSandbox', { config: podConfig('sweep-kept') })).pod_sandbox_id;
      const keptInfo = JSON.parse((await daemon.client.runtime.call('PodSandboxStatus', { pod_sandbox_id: kept, verbose: true })).info.info);
      const keptShm = `${dirs.stateDir}/sandboxes/${kept}/shm`;
      assert.equal(await mounted(keptShm), true);

      // The crash: a sandbox's shm and netns were made, its record never written.
      assert.equal(await daemon.stop('SIGKILL'), -1);
      const ghost = randomBytes(32).toString('hex');
      const ghostShm = `${dirs.stateDir}/sandboxes/${ghost}/shm`;
      await mountPodShm(ghostShm);
      const ghostNetns = await createPodNetns('sweep-ghost', { paths: podNetnsPaths('sweep-ghost', { dir: netnsDir, hex: ghost.slice(0, 16) }) });
      // Named like ours, but of a sandbox this daemon never heard of.
      foreign = await createPodNetns('sweep-foreign', { dir: netnsDir });

      daemon = await TestDaemon.start(dirs);
      assert.equal(existsSync(ghostNetns.path), false, 'the unexplained netns pin is gone');
      assert.equal(existsSync(ghostNetns.symlink), false, 'and its link');
      assert.equal(await mounted(ghostShm), false, 'the unexplained shm mount is gone');
      assert.equal(existsSync(`${dirs.stateDir}/sandboxes/${ghost}`), false, 'and its directory');
      assert.match(daemon.log(), new RegExp(`"object":"${ghostNetns.path}".*"msg":"removing a host object no record explains"`));

      assert.equal(existsSync(foreign.path), true, 'a pin this daemon has no trace of is left alone');
      assert.equal(existsSync(keptInfo.netnsPath), true, 'the live pod keeps its netns');
      assert.equal(await mounted(keptShm), true, 'and its shm');
      const status = await daemon.client.runtime.call('PodSandboxStatus', { pod_sandbox_id: kept });
      assert.equal(status.status!.state, 'SANDBOX_READY');

      await daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: kept });
      kept = undefined;
      assert.deepEqual(await net.allocatedIps(), []);
    } finally {
      if (kept) await daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: kept }).catch(() => undefined);
      await daemon.stop();
      // The foreign pin is the test's own: it goes before the host is checked.
      if (foreign) await removePodNetns(foreign);
      foreign = undefined;
    }
  });
});
