// What a pod carries (its environment: where Kubernetes puts Secret values), the state database and
// image layers are root's alone: an unprivileged local user finds none of it, and an install made with
// looser modes is tightened at start.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { execa } from 'execa';
import { removeDirs, TestDaemon, makeDaemonDirs, type DaemonDirs } from '../../support/daemon.js';
import { testNetwork } from '../../support/pod-daemon.js';
import { containerConfig, PAUSE_IMAGE, podConfig, POD_LOG_ROOT } from '../../support/pods.js';

/** Runs a command as user and group nobody, with no supplementary groups. */
const asNobody = (command: string[]) => execa('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', '--', ...command], { reject: false });

const mode = (path: string) => (statSync(path).mode & 0o777).toString(8);

describe('secrets on the node', () => {
  const secret = `s3cret-${randomBytes(8).toString('hex')}`;
  let dirs: DaemonDirs;
  let daemon: TestDaemon;
  let pod = '';
  let container = '';
  // Registered before the network's: the pod and the daemon go before the network and the directories.
  after(async () => {
    if (pod) await daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: pod });
    await daemon.stop();
  });
  const network = testNetwork(92, 'the secrets tests', { cleanup: () => removeDirs(dirs) });
  before(async () => {
    dirs = makeDaemonDirs('', network.net);
    // Everything above the daemon's directories is open to all, as /var/lib and /run are: only minicri's own modes protect.
    chmodSync(dirs.base, 0o755);
    chmodSync(POD_LOG_ROOT, 0o755);
    daemon = await TestDaemon.start(dirs);
    const config = podConfig('secrets');
    pod = (await daemon.client.runtime.call('RunPodSandbox', { config })).pod_sandbox_id;
    container = (await daemon.client.runtime.call('CreateContainer', {
      pod_sandbox_id: pod, sandbox_config: config,
      config: containerConfig('app', PAUSE_IMAGE, ['/pause'], (c) => { c.envs = [{ key: 'DB_PASSWORD', value: Buffer.from(secret) }]; }),
    })).container_id;
    await daemon.client.runtime.call('StartContainer', { container_id: container });
  });

  it('are not found by an unprivileged user anywhere in the daemon\'s directories or the pod logs', async () => {
    // The secret is there for root to find (so the search below could find it)...
    const asRoot = await execa('grep', ['-rl', '-D', 'skip', secret, dirs.base], { reject: false });
    assert.match(asRoot.stdout, /config\.json/, 'root finds the spec holding the secret');
    // ...and nowhere nobody can read.
    const search = await asNobody(['grep', '-rl', '-D', 'skip', secret, dirs.base, POD_LOG_ROOT]);
    assert.equal(search.stdout, '', `nobody read the secret in: ${search.stdout}`);
    for (const path of [join(dirs.rootDir, 'containers', container, 'config.json'), join(dirs.rootDir, 'minicri.db'), join(dirs.rootDir, 'minicri.db-wal')]) {
      const read = await asNobody(['cat', path]);
      assert.notEqual(read.exitCode, 0, `nobody read ${path}`);
      assert.match(read.stderr, /Permission denied/);
    }
    const layers = await asNobody(['ls', join(dirs.rootDir, 'images')]);
    assert.match(layers.stderr, /Permission denied/, 'image layers are out of reach');
  });

  it('has root-only modes on the directories and files that hold them, and tightens an older install at start', async () => {
    const expect = () => {
      assert.equal(mode(dirs.rootDir), '700');
      assert.equal(mode(dirs.stateDir), '700');
      assert.equal(mode(join(dirs.rootDir, 'images')), '700');
      for (const f of ['minicri.db', 'minicri.db-wal', 'minicri.db-shm']) assert.equal(mode(join(dirs.rootDir, f)), '600', f);
      assert.equal(mode(join(dirs.rootDir, 'containers', container, 'config.json')), '600');
      assert.equal(mode(join(dirs.rootDir, 'containers', container)), '700');
    };
    expect();
    assert.equal(await daemon.stop(), 0);
    // An install made by an older minicri.
    for (const dir of [dirs.rootDir, dirs.stateDir, join(dirs.rootDir, 'images')]) chmodSync(dir, 0o711);
    for (const f of ['minicri.db', 'minicri.db-wal', 'minicri.db-shm']) if (existsSync(join(dirs.rootDir, f))) chmodSync(join(dirs.rootDir, f), 0o644);
    daemon = await TestDaemon.start(dirs);
    expect();
  });
});
