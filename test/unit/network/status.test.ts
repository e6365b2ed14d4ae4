// NetworkReady as kubelet's node-ready probe reads it: the default network's plugins (and loopback) present.
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CniManager } from '../../../cni/manager.js';
import { silentLogger } from '../../../core/log.js';

describe('CNI network status', () => {
  let dir: string;
  let manager: CniManager;
  const plugin = async (name: string) => {
    await writeFile(join(dir, 'bin', name), '#!/bin/sh\nexit 0\n');
    await chmod(join(dir, 'bin', name), 0o755);
  };
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'minicri-cni-status-'));
    await mkdir(join(dir, 'net.d'));
    await mkdir(join(dir, 'bin'));
    await writeFile(join(dir, 'net.d', '10-pods.conflist'), JSON.stringify({
      cniVersion: '1.0.0', name: 'pods', plugins: [{ type: 'bridge', ipam: { type: 'host-local' } }, { type: 'portmap' }],
    }));
    for (const name of ['loopback', 'bridge']) await plugin(name);
    manager = await CniManager.create({ confDir: join(dir, 'net.d'), binDirs: [join(dir, 'bin')], cacheDir: join(dir, 'cache'), log: silentLogger, watch: false });
  });
  after(async () => {
    manager.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('is not ready while a plugin of the default network is missing, and names it', async () => {
    assert.deepEqual(await manager.status(), {
      ready: false, reason: 'NetworkPluginNotReady', message: `CNI plugin "portmap" of network "pods" not found in ${join(dir, 'bin')}`,
    });
  });

  it('is ready once every plugin is there', async () => {
    await plugin('portmap');
    assert.deepEqual(await manager.status(), { ready: true, reason: '', message: '' });
  });
});
