// The manager's walks with a recording plugin in place of the real ones: which attachment gets which call in
// what order on set-up and tear-down, and what a failing attachment midway leaves behind.
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { CniManager, type PodNetworkRequest } from '../../../cni/manager.js';
import { CniPluginError } from '../../../cni/exec.js';
import { silentLogger } from '../../../core/log.js';

/**
 * A plugin run by the very Node that runs the tests, whatever PATH holds: appends "<command> <network> <ifname>"
 * to calls.log; refuses with CNI error 11 when a file fail-<command>-<network> exists; on ADD, prints a
 * result with one address on the interface.
 */
const RECORDER = (dir: string) => `#!${process.execPath}
const fs = require('node:fs');
const conf = JSON.parse(fs.readFileSync(0, 'utf8'));
const { CNI_COMMAND: command, CNI_IFNAME: ifName, CNI_NETNS: netns } = process.env;
fs.appendFileSync(${JSON.stringify(join(dir, 'calls.log'))}, command + ' ' + conf.name + ' ' + ifName + '\\n');
if (fs.existsSync(${JSON.stringify(dir)} + '/fail-' + command + '-' + conf.name)) {
  process.stdout.write(JSON.stringify({ cniVersion: conf.cniVersion, code: 11, msg: conf.name + ' refuses ' + command }));
  process.exit(1);
}
if (command === 'ADD') {
  const address = ifName === 'lo' ? '127.0.0.1/8' : '10.1.0.' + (2 + ['eth0', 'net1', 'net2'].indexOf(ifName)) + '/24';
  const result = { cniVersion: conf.cniVersion, interfaces: [{ name: ifName, sandbox: netns }], ips: [{ address, interface: 0 }] };
  process.stdout.write(JSON.stringify(result));
}
`;

function definition(name: string) {
  return {
    apiVersion: 'k8s.cni.cncf.io/v1',
    kind: 'NetworkAttachmentDefinition',
    metadata: { name, namespace: 'pods' },
    spec: { config: JSON.stringify({ cniVersion: '1.0.0', name: `net-${name}`, type: 'recorder' }) },
  };
}

describe('CNI manager walks', () => {
  let dir: string;
  let manager: CniManager;
  const pod: PodNetworkRequest = {
    sandboxId: 'sandbox1', name: 'p', namespace: 'pods', uid: 'u1', netnsPath: '/run/netns/not-there', portMappings: [],
    annotations: { 'k8s.v1.cni.cncf.io/networks': 'a, b' },
  };
  const calls = async () => (await readFile(join(dir, 'calls.log'), 'utf8').catch(() => '')).split('\n').filter(Boolean);
  const cached = async () => (await readdir(join(dir, 'cache', 'results')).catch(() => [] as string[])).sort();
  const fail = (command: string, network: string) => writeFile(join(dir, `fail-${command}-${network}`), '');

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'minicri-cni-walk-'));
    await mkdir(join(dir, 'bin'));
    await mkdir(join(dir, 'net.d'));
    await mkdir(join(dir, 'networks.d'));
    for (const type of ['loopback', 'recorder']) {
      await writeFile(join(dir, 'bin', type), RECORDER(dir));
      await chmod(join(dir, 'bin', type), 0o755);
    }
    const cluster = { cniVersion: '1.0.0', name: 'cluster', plugins: [{ type: 'recorder' }] };
    await writeFile(join(dir, 'net.d', '10-cluster.conflist'), JSON.stringify(cluster));
    const definitions = { apiVersion: 'v1', kind: 'List', items: [definition('a'), definition('b')] };
    await writeFile(join(dir, 'networks.d', 'defs.json'), JSON.stringify(definitions));
    manager = await CniManager.create({
      confDir: join(dir, 'net.d'), binDirs: [join(dir, 'bin')], cacheDir: join(dir, 'cache'), networksDir: join(dir, 'networks.d'),
      log: silentLogger, watch: false,
    });
  });
  beforeEach(async () => {
    for (const f of await readdir(dir)) if (f.startsWith('fail-') || f === 'calls.log') await rm(join(dir, f));
    await rm(join(dir, 'cache'), { recursive: true, force: true });
  });
  after(async () => {
    manager.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('sets up lo and eth0, then each secondary network in the pod\'s order; tears down in reverse, lo without a DEL', async () => {
    const status = await manager.setUpPod(pod);
    const adds = await calls();
    assert.deepEqual(adds.slice(0, 2).sort(), ['ADD cluster eth0', 'ADD cni-loopback lo']);
    assert.deepEqual(adds.slice(2), ['ADD net-a net1', 'ADD net-b net2']);
    assert.deepEqual(status.ips, ['10.1.0.2']);
    assert.deepEqual(status.networkStatus.map((e) => [e.name, e.interface, e.ips]), [
      ['cluster', 'eth0', ['10.1.0.2']], ['pods/a', 'net1', ['10.1.0.3']], ['pods/b', 'net2', ['10.1.0.4']],
    ]);
    assert.equal(status.results.length, 4);
    assert.deepEqual(await cached(), ['cluster-sandbox1-eth0', 'cni-loopback-sandbox1-lo', 'net-a-sandbox1-net1', 'net-b-sandbox1-net2']);

    await manager.tearDownPod(pod);
    assert.deepEqual((await calls()).slice(4), ['DEL net-b net2', 'DEL net-a net1', 'DEL cluster eth0']);
    assert.deepEqual(await cached(), []);
  });

  it('a secondary attachment failing midway: its own ADD undone, then what was made, last first; nothing cached', async () => {
    await fail('ADD', 'net-b');
    await assert.rejects(manager.setUpPod(pod), (err: unknown) => err instanceof CniPluginError && /net-b refuses ADD/.test(err.message));
    const log = await calls();
    assert.deepEqual(log.slice(2), [
      'ADD net-a net1', 'ADD net-b net2', 'DEL net-b net2', 'DEL net-a net1', 'DEL cluster eth0', 'DEL cni-loopback lo',
    ]);
    assert.deepEqual(await cached(), []);
  });

  it('eth0 failing: lo is undone, no secondary network is tried, eth0\'s error is the one reported', async () => {
    await fail('ADD', 'cluster');
    await assert.rejects(manager.setUpPod(pod), /cluster refuses ADD/);
    const log = await calls();
    // eth0's ADD undoes itself while lo's may still run; lo is undone once both are over.
    assert.deepEqual([...log].sort(), ['ADD cluster eth0', 'ADD cni-loopback lo', 'DEL cluster eth0', 'DEL cni-loopback lo']);
    assert.equal(log.at(-1), 'DEL cni-loopback lo');
    assert.deepEqual(await cached(), []);
  });

  it('a DEL failing midway of tear-down: the others still go, the failed one stays cached for the retry', async () => {
    await manager.setUpPod(pod);
    await fail('DEL', 'net-a');
    await assert.rejects(manager.tearDownPod(pod), /net-a refuses DEL/);
    assert.deepEqual((await calls()).slice(4), ['DEL net-b net2', 'DEL net-a net1', 'DEL cluster eth0']);
    assert.deepEqual(await cached(), ['net-a-sandbox1-net1']);
    // The retry DELs the cached one, and again (DEL is idempotent) what the pod's plan says it had.
    await rm(join(dir, 'fail-DEL-net-a'));
    await manager.tearDownPod(pod);
    assert.deepEqual((await calls()).slice(7), ['DEL net-b net2', 'DEL net-a net1', 'DEL cluster eth0']);
    assert.deepEqual(await cached(), []);
  });
});
