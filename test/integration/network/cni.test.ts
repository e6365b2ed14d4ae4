// Real CNI runs with the Debian plugins (loopback, bridge, host-local, portmap) and our test plugins.
// Every network here is 10.233.<n>.0/24 on bridge mcnt-br<n>, with no gateway and no routes out.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { CniManager, NETWORK_NOT_READY, type PodNetworkRequest } from '../../../cni/manager.js';
import { CniPluginError } from '../../../cni/exec.js';
import { listPodNetns, removePodNetns } from '../../../netns/netns.js';
import { DeadlineExceeded, FailedPrecondition, InvalidArgument } from '../../../core/errors.js';
import { silentLogger } from '../../../core/log.js';
import { bridgePorts, inNetns, makeTestNet, recordedCalls, waitFor, type TestNet } from '../../support/cni-env.js';

/** Live processes (zombies aside) run for a CNI command on a container: found by the CNI_* environment they inherit. */
async function livePluginProcesses(containerId: string, command: string): Promise<string[]> {
  const found: string[] = [];
  for (const pid of (await readdir('/proc')).filter((e) => /^\d+$/.test(e))) {
    const [environ, stat] = await Promise.all([readFile(`/proc/${pid}/environ`, 'utf8'), readFile(`/proc/${pid}/stat`, 'utf8')]).catch(() => ['', '']);
    const vars = environ.split('\0');
    if (vars.includes(`CNI_CONTAINERID=${containerId}`) && vars.includes(`CNI_COMMAND=${command}`) && !/^\d+ \(.*\) Z/.test(stat)) found.push(`${pid}: ${stat.slice(0, 60)}`);
  }
  return found;
}

function podRequest(id: string, netnsPath: string, extra: Partial<PodNetworkRequest> = {}): PodNetworkRequest {
  return {
    sandboxId: id,
    name: `pod-${id.slice(0, 6)}`,
    namespace: 'mcnt',
    uid: `uid-${id.slice(0, 6)}`,
    netnsPath,
    portMappings: [],
    annotations: {},
    ...extra,
  };
}

function sandboxId(tag: string): string {
  return `${tag}${'0'.repeat(64)}`.slice(0, 64);
}

async function manager(net: TestNet, t: { after: (fn: () => unknown) => void }, extra: { watch?: boolean; pluginTimeoutMs?: number } = {}) {
  const m = await CniManager.create({ confDir: net.confDir, binDirs: net.binDirs, cacheDir: net.cacheDir, log: silentLogger, watch: false, ...extra });
  t.after(() => m.close());
  return m;
}

async function cacheFiles(net: TestNet): Promise<string[]> {
  return (await readdir(path.join(net.cacheDir, 'results')).catch(() => [] as string[])).sort();
}

function inSubnet(ip: string, net: TestNet): boolean {
  return ip.startsWith(`10.233.${net.n}.`);
}

test('a pod gets an IP on the bridge, lo is up, two pods ping each other, teardown releases everything', async (t) => {
  const net = await makeTestNet(41);
  t.after(() => net.cleanup());
  await net.writeBridgeConf();
  const m = await manager(net, t);
  assert.deepEqual(await m.status(), { ready: true, reason: '', message: '' });
  assert.equal(m.defaultNetworkName(), net.networkName);

  const nsA = await net.podNetns('mcnt-a');
  const nsB = await net.podNetns('mcnt-b');
  const reqA = podRequest(sandboxId('a1'), nsA.path);
  const reqB = podRequest(sandboxId('b1'), nsB.path);
  t.after(() => m.tearDownPod(reqA).catch(() => {}));
  t.after(() => m.tearDownPod(reqB).catch(() => {}));
  const a = await m.setUpPod(reqA);
  // CHECK right away: this bridge plugin version also compares the bridge's MAC, which Linux changes
  // as ports join (it takes the lowest port MAC), so a later CHECK can fail for reasons not ours.
  await m.checkPod(reqA);
  const b = await m.setUpPod(reqB);
  assert.equal(a.ips.length, 1);
  assert.ok(inSubnet(a.ips[0]!, net), a.ips[0]);
  assert.ok(inSubnet(b.ips[0]!, net), b.ips[0]);
  assert.notEqual(a.ips[0], b.ips[0]);
  assert.equal(a.results.length, 2);
  assert.deepEqual(await net.allocatedIps(), [a.ips[0]!, b.ips[0]!].sort());

  // Inside the pod (through the symlink, as an operator would): lo up, eth0 with the pod IP.
  assert.match(await inNetns(nsA.symlink, ['ip', '-o', 'link', 'show', 'lo']), /[<,]UP[,>]/);
  assert.match(await inNetns(nsA.path, ['ip', '-o', '-4', 'addr', 'show', 'dev', 'eth0']), new RegExp(` ${a.ips[0]!.replace(/\./g, '\\.')}/24 `));
  assert.match(await inNetns(nsA.path, ['ip', '-o', '-4', 'addr', 'show', 'dev', 'lo']), /127\.0\.0\.1\/8/);
  // No route out of the subnet.
  assert.doesNotMatch(await inNetns(nsA.path, ['ip', 'route']), /default/);
  await inNetns(nsA.path, ['busybox', 'ping', '-c', '1', '-W', '3', b.ips[0]!]);
  await inNetns(nsB.path, ['busybox', 'ping', '-c', '1', '-W', '3', a.ips[0]!]);
  assert.equal((await bridgePorts(net.bridge)).length, 2);

  assert.deepEqual(await cacheFiles(net), [
    `cni-loopback-${reqA.sandboxId}-lo`,
    `cni-loopback-${reqB.sandboxId}-lo`,
    `${net.networkName}-${reqA.sandboxId}-eth0`,
    `${net.networkName}-${reqB.sandboxId}-eth0`,
  ]);

  await m.tearDownPod(reqA);
  assert.deepEqual(await net.allocatedIps(), [b.ips[0]!]);
  // eth0 is gone; lo got no DEL (it ends with the namespace), only its cache entry went.
  assert.match(await inNetns(nsA.path, ['ip', '-o', 'link']), /^1: lo: <[^>]*\bUP\b[^>]*>[^\n]*\n?$/);
  assert.ok(!(await cacheFiles(net)).some((f) => f.includes(reqA.sandboxId)));
  await m.tearDownPod(reqA); // DEL twice succeeds
  await removePodNetns(nsB);
  await m.tearDownPod(reqB); // netns already gone: plugins still release the IP
  await m.tearDownPod(reqB);
  assert.deepEqual(await net.allocatedIps(), []);
  assert.deepEqual(await bridgePorts(net.bridge), []);
  assert.deepEqual(await cacheFiles(net), []);
  await assert.rejects(m.checkPod(reqB), /gone/);
});

test('a failing plugin in the chain leaves no IP, veth, cache entry or interface behind', async (t) => {
  const net = await makeTestNet(42);
  t.after(() => net.cleanup());
  await net.writeBridgeConf({ extra: [{ type: 'mcnt-fail' }] });
  const m = await manager(net, t);
  const ns = await net.podNetns('mcnt-fail');
  const req = podRequest(sandboxId('f1'), ns.path);
  t.after(() => m.tearDownPod(req).catch(() => {}));
  await assert.rejects(m.setUpPod(req), (err: unknown) => {
    assert.ok(err instanceof CniPluginError);
    assert.equal(err.plugin, 'mcnt-fail');
    assert.equal(err.command, 'ADD');
    assert.equal(err.cniCode, 11);
    assert.equal(err.cniMsg, 'mcnt-fail refuses ADD');
    assert.equal(err.cniDetails, 'test plugin');
    assert.match(err.stderr, /refusing ADD for f1/);
    assert.match(err.message, /"mcnt-fail".*network "mcnt-net42".*code 11: mcnt-fail refuses ADD \(test plugin\).*stderr: mcnt-fail: refusing/);
    return true;
  });
  assert.deepEqual(await net.allocatedIps(), []);
  assert.deepEqual(await bridgePorts(net.bridge), []);
  assert.deepEqual(await cacheFiles(net), []);
  assert.doesNotMatch(await inNetns(ns.path, ['ip', '-o', 'link']), /eth0/);
});

test('after a restart, teardown releases the IP through the cache even when the config changed or vanished', async (t) => {
  const net = await makeTestNet(43);
  t.after(() => net.cleanup());
  const confFile = await net.writeBridgeConf();
  const m1 = await manager(net, t);
  const ns1 = await net.podNetns('mcnt-r1');
  const ns2 = await net.podNetns('mcnt-r2');
  const req1 = podRequest(sandboxId('c1'), ns1.path);
  const req2 = podRequest(sandboxId('c2'), ns2.path);
  await m1.setUpPod(req1);
  await m1.setUpPod(req2);
  assert.equal((await net.allocatedIps()).length, 2);
  m1.close();

  // Config removed: the new manager has no network at all, yet DEL replays the cached one.
  await rm(confFile);
  const m2 = await manager(net, t);
  assert.equal((await m2.status()).ready, false);
  await m2.tearDownPod(req1);
  assert.equal((await net.allocatedIps()).length, 1);
  m2.close();

  // Config replaced by a different network: DEL still goes to the network the pod was added to.
  await writeFile(path.join(net.confDir, '05-other.conflist'), JSON.stringify({ cniVersion: '1.0.0', name: 'mcnt-other43', plugins: [{ type: 'mcnt-fail' }] }));
  const m3 = await manager(net, t);
  assert.equal(m3.defaultNetworkName(), 'mcnt-other43');
  await m3.tearDownPod(req2);
  assert.deepEqual(await net.allocatedIps(), []);
  assert.deepEqual(await bridgePorts(net.bridge), []);
  assert.deepEqual(await cacheFiles(net), []);
});

test('gc after a restart releases attachments of sandboxes that no longer exist and keeps the rest', async (t) => {
  const net = await makeTestNet(50);
  t.after(() => net.cleanup());
  await net.writeBridgeConf();
  const m1 = await manager(net, t);
  const nsKeep = await net.podNetns('mcnt-keep');
  const nsGone = await net.podNetns('mcnt-gone');
  const keep = podRequest(sandboxId('k1'), nsKeep.path);
  const gone = podRequest(sandboxId('g1'), nsGone.path);
  t.after(() => m1.tearDownPod(keep).catch(() => {}));
  const kept = await m1.setUpPod(keep);
  await m1.setUpPod(gone);
  await removePodNetns(nsGone);
  m1.close();

  const m2 = await manager(net, t);
  await m2.gc([keep.sandboxId]);
  assert.deepEqual(await net.allocatedIps(), [kept.ips[0]!]);
  assert.deepEqual(await cacheFiles(net), [`cni-loopback-${keep.sandboxId}-lo`, `${net.networkName}-${keep.sandboxId}-eth0`]);
  assert.equal((await bridgePorts(net.bridge)).length, 1);
  await m2.gc([keep.sandboxId]); // nothing left to do
  await m2.tearDownPod(keep);
  assert.deepEqual(await net.allocatedIps(), []);
});

test('status follows the conf dir: not ready until a config appears (dir created later), then tracks changes', async (t) => {
  const net = await makeTestNet(44);
  t.after(() => net.cleanup());
  const m = await manager(net, t, { watch: true });
  const notReady = await m.status();
  assert.equal(notReady.ready, false);
  assert.equal(notReady.reason, NETWORK_NOT_READY);
  assert.match(notReady.message, new RegExp(net.confDir));
  const ns = await net.podNetns('mcnt-watch');
  const req = podRequest(sandboxId('w1'), ns.path);
  await assert.rejects(m.setUpPod(req), (e: unknown) => e instanceof FailedPrecondition && /no valid CNI network config/.test((e as Error).message));

  const file = await net.writeBridgeConf();
  await waitFor(async () => (await m.status()).ready, 5000, 'network ready');
  assert.equal(m.defaultNetworkName(), net.networkName);

  await rm(file);
  await waitFor(async () => !(await m.status()).ready, 5000, 'network gone');
  assert.equal(m.defaultNetworkName(), undefined);

  await writeFile(path.join(net.confDir, '01-first.conf'), JSON.stringify({ cniVersion: '0.4.0', name: 'mcnt-conf44', type: 'mcnt-fail' }));
  await net.writeBridgeConf({ file: '50-later.conflist' });
  await waitFor(async () => m.defaultNetworkName() === 'mcnt-conf44', 5000, 'first file to win');
  assert.equal((await m.status()).ready, true);

  // A changed file is picked up; a network whose plugin is not installed is not ready, naming the plugin.
  await writeFile(path.join(net.confDir, '01-first.conf'), JSON.stringify({ cniVersion: '1.0.0', name: 'mcnt-changed44', type: 'mcnt-missing' }));
  await waitFor(async () => m.defaultNetworkName() === 'mcnt-changed44', 5000, 'changed file');
  const missing = await m.status();
  assert.equal(missing.ready, false);
  assert.match(missing.message, /"mcnt-missing".*not found/);

  // The whole dir removed and made again: the watcher follows.
  await rm(net.confDir, { recursive: true });
  await waitFor(async () => m.defaultNetworkName() === undefined, 5000, 'dir removed');
  await net.writeBridgeConf();
  await waitFor(async () => (await m.status()).ready, 5000, 'dir recreated');
  const st = await m.setUpPod(req);
  assert.ok(inSubnet(st.ips[0]!, net));
  await m.tearDownPod(req);
  assert.deepEqual(await net.allocatedIps(), []);
});

test('a bad bandwidth annotation is rejected before any plugin runs', async (t) => {
  const net = await makeTestNet(49);
  t.after(() => net.cleanup());
  await net.writeBridgeConf();
  const m = await manager(net, t);
  const ns = await net.podNetns('mcnt-bw');
  const req = podRequest(sandboxId('e1'), ns.path, { annotations: { 'kubernetes.io/egress-bandwidth': '10' } });
  await assert.rejects(m.setUpPod(req), (e: unknown) => e instanceof InvalidArgument && /unreasonably small/.test((e as Error).message));
  assert.deepEqual(await cacheFiles(net), []);
  assert.deepEqual(await net.allocatedIps(), []);
  await assert.rejects(m.setUpPod(podRequest('../x', ns.path)), InvalidArgument);
});

test('20 pods set up in parallel and torn down in parallel leave nothing behind', async (t) => {
  const net = await makeTestNet(45);
  t.after(() => net.cleanup());
  await net.writeBridgeConf();
  const m = await manager(net, t);
  const ids = Array.from({ length: 20 }, (_, i) => sandboxId(`p${String(i).padStart(2, '0')}`));
  const pods = await Promise.all(
    ids.map(async (id) => {
      const ns = await net.podNetns(`mcnt-par-${id.slice(0, 3)}`);
      const req = podRequest(id, ns.path);
      t.after(() => m.tearDownPod(req).catch(() => {}));
      return { ns, req, status: await m.setUpPod(req) };
    }),
  );
  const ips = pods.map((p) => p.status.ips[0]!);
  assert.equal(new Set(ips).size, 20);
  assert.ok(ips.every((ip) => inSubnet(ip, net)));
  assert.equal((await net.allocatedIps()).length, 20);
  assert.equal((await bridgePorts(net.bridge)).length, 20);

  await Promise.all(
    pods.map(async (p) => {
      await m.tearDownPod(p.req);
      await removePodNetns(p.ns);
    }),
  );
  assert.deepEqual(await net.allocatedIps(), []);
  assert.deepEqual(await bridgePorts(net.bridge), []);
  assert.deepEqual(await cacheFiles(net), []);
  const left = await listPodNetns();
  assert.ok(pods.every((p) => !left.includes(p.ns.path)));
});

test('CNI 1.1.0 plugin: ADD gets env, CNI_ARGS and runtimeConfig; STATUS feeds status(); GC removes stale attachments', async (t) => {
  const net = await makeTestNet(46);
  t.after(() => net.cleanup());
  await execa('mkdir', ['-p', net.confDir]);
  const capabilities = { portMappings: true, bandwidth: true, ipRanges: true, cgroupPath: true, 'io.kubernetes.cri.pod-annotations': true };
  await writeFile(
    path.join(net.confDir, '10-record.conflist'),
    JSON.stringify({ cniVersion: '1.1.0', name: 'mcnt-rec46', plugins: [{ type: 'mcnt-record', recordDir: net.recordDir, capabilities }] }),
  );
  const m = await manager(net, t);
  m.setPodCidr('10.233.46.0/24');

  assert.deepEqual(await m.status(), { ready: true, reason: '', message: '' });
  const status = (await recordedCalls(net.recordDir)).filter((c) => c.env.CNI_COMMAND === 'STATUS');
  assert.equal(status.length, 1);
  assert.equal(status[0]!.env.CNI_PATH, net.binDirs.join(':'));
  assert.equal(status[0]!.env.CNI_CONTAINERID, undefined);
  assert.equal(status[0]!.stdin.name, 'mcnt-rec46');
  assert.equal(status[0]!.stdin.cniVersion, '1.1.0');

  await writeFile(path.join(net.recordDir, 'notready'), '');
  const down = await m.status();
  assert.equal(down.ready, false);
  assert.equal(down.reason, NETWORK_NOT_READY);
  assert.match(down.message, /mcnt-record.*STATUS failed: code 50: mcnt-record not ready/);
  await rm(path.join(net.recordDir, 'notready'));

  const nsA = await net.podNetns('mcnt-rec-a');
  const nsB = await net.podNetns('mcnt-rec-b');
  const annotations = { 'kubernetes.io/ingress-bandwidth': '1M', team: 'net' };
  const reqA = podRequest(sandboxId('aa'), nsA.path, {
    annotations,
    cgroupParent: '/kubepods/besteffort/podx',
    portMappings: [{ protocol: 'udp', containerPort: 53, hostPort: 10053, hostIp: '127.0.0.1' }],
  });
  const reqB = podRequest(sandboxId('bb'), nsB.path);
  t.after(() => m.tearDownPod(reqA).catch(() => {}));
  t.after(() => m.tearDownPod(reqB).catch(() => {}));
  await m.setUpPod(reqA);
  await m.setUpPod(reqB);

  const add = (await recordedCalls(net.recordDir)).find((c) => c.env.CNI_COMMAND === 'ADD' && c.env.CNI_CONTAINERID === reqA.sandboxId)!;
  assert.deepEqual(add.env, {
    CNI_COMMAND: 'ADD',
    CNI_CONTAINERID: reqA.sandboxId,
    CNI_NETNS: nsA.path,
    CNI_IFNAME: 'eth0',
    CNI_PATH: net.binDirs.join(':'),
    CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=mcnt;K8S_POD_NAME=${reqA.name};K8S_POD_INFRA_CONTAINER_ID=${reqA.sandboxId};K8S_POD_UID=${reqA.uid}`,
  });
  assert.deepEqual(add.stdin.runtimeConfig, {
    portMappings: [{ hostPort: 10053, containerPort: 53, protocol: 'udp', hostIP: '127.0.0.1' }],
    bandwidth: { ingressRate: 1_000_000, ingressBurst: 4294967295 },
    ipRanges: [[{ subnet: '10.233.46.0/24' }]],
    cgroupPath: '/kubepods/besteffort/podx',
    'io.kubernetes.cri.pod-annotations': annotations,
  });
  assert.equal(add.stdin.prevResult, undefined);

  await m.checkPod(reqA);
  const check = (await recordedCalls(net.recordDir)).find((c) => c.env.CNI_COMMAND === 'CHECK')!;
  assert.deepEqual(check.stdin.prevResult, { cniVersion: '1.1.0', interfaces: [], ips: [] });

  // B's sandbox no longer exists: GC deletes its attachments and tells the plugin what is still valid.
  await rm(net.recordDir + '/', { recursive: true });
  await execa('mkdir', ['-p', net.recordDir]);
  await m.gc([reqA.sandboxId]);
  const calls = await recordedCalls(net.recordDir);
  const del = calls.filter((c) => c.env.CNI_COMMAND === 'DEL');
  assert.equal(del.length, 1);
  assert.equal(del[0]!.env.CNI_CONTAINERID, reqB.sandboxId);
  assert.deepEqual(del[0]!.stdin.prevResult, { cniVersion: '1.1.0', interfaces: [], ips: [] });
  const gc = calls.filter((c) => c.env.CNI_COMMAND === 'GC');
  assert.equal(gc.length, 1);
  assert.deepEqual(gc[0]!.stdin['cni.dev/valid-attachments'], [{ containerID: reqA.sandboxId, ifname: 'eth0' }]);
  assert.equal(gc[0]!.env.CNI_CONTAINERID, undefined);
  assert.deepEqual(await cacheFiles(net), [`cni-loopback-${reqA.sandboxId}-lo`, `mcnt-rec46-${reqA.sandboxId}-eth0`]);

  await m.tearDownPod(reqA);
  assert.deepEqual(await cacheFiles(net), []);
});

test('a hung plugin is killed after the timeout and its ADD undone', async (t) => {
  const net = await makeTestNet(47);
  t.after(() => net.cleanup());
  await execa('mkdir', ['-p', net.confDir]);
  await writeFile(
    path.join(net.confDir, '10-slow.conflist'),
    JSON.stringify({ cniVersion: '1.0.0', name: 'mcnt-slow47', plugins: [{ type: 'mcnt-record', recordDir: net.recordDir, sleepSeconds: 5 }] }),
  );
  const m = await manager(net, t, { pluginTimeoutMs: 300 });
  const ns = await net.podNetns('mcnt-slow');
  const req = podRequest(sandboxId('s1'), ns.path);
  await assert.rejects(m.setUpPod(req), (err: unknown) => err instanceof DeadlineExceeded && /mcnt-record.*within 300ms/.test((err as Error).message));
  // Killed with all it spawned (its `sleep 5` included), not left to finish: no process of that ADD is alive.
  assert.deepEqual(await livePluginProcesses(req.sandboxId, 'ADD'), []);
  const commands = (await recordedCalls(net.recordDir)).map((c) => c.env.CNI_COMMAND);
  assert.deepEqual(commands.sort(), ['ADD', 'DEL']);
  assert.deepEqual(await cacheFiles(net), []);
});

test('portmap gets the pod host ports and removes its rules on teardown', async (t) => {
  const net = await makeTestNet(48);
  t.after(() => net.cleanup());
  await net.writeBridgeConf({ extra: [{ type: 'portmap', capabilities: { portMappings: true } }] });
  const m = await manager(net, t);
  const ns = await net.podNetns('mcnt-pm');
  const hostPort = 20000 + Math.floor(Math.random() * 20000);
  const req = podRequest(sandboxId('d1'), ns.path, { portMappings: [{ protocol: 'tcp', containerPort: 80, hostPort, hostIp: '127.0.0.1' }] });
  t.after(() => m.tearDownPod(req).catch(() => {}));
  const st = await m.setUpPod(req);
  const nat = String((await execa('iptables', ['-w', '-t', 'nat', '-S'])).stdout);
  assert.match(nat, new RegExp(`--dport ${hostPort} .*${st.ips[0]!.replace(/\./g, '\\.')}:80`));
  await m.tearDownPod(req);
  assert.doesNotMatch(String((await execa('iptables', ['-w', '-t', 'nat', '-S'])).stdout), new RegExp(`--dport ${hostPort}\\b`));
  assert.deepEqual(await net.allocatedIps(), []);
});
