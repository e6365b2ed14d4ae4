// The daemon as a user meets it: started on its own socket, answering the foundation RPCs,
// refusing what it must refuse, surviving bad input, keeping state across restarts.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import http2 from 'node:http2';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { CriClient } from '../../support/cri-client.js';
import { makeDaemonDirs, removeDirs, runMinicri, TestDaemon, type DaemonDirs } from '../../support/daemon.js';
import { hostCheck } from '../../support/pod-daemon.js';

function grpcCode(err: unknown): number | undefined {
  return (err as { code?: number }).code;
}

/** Sends raw bytes as a gRPC request body over HTTP/2 and returns the grpc-status trailer. */
function rawCall(socket: string, path: string, body: Buffer): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const session = http2.connect('http://localhost', { createConnection: () => net.connect(socket) });
    session.on('error', reject);
    const stream = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers' });
    let status: string | undefined;
    stream.on('response', (headers) => { status ??= headers['grpc-status'] as string | undefined; });
    stream.on('trailers', (trailers) => { status = trailers['grpc-status'] as string | undefined; });
    stream.on('close', () => { session.close(); resolve(status); });
    stream.on('error', reject);
    stream.resume();
    stream.end(body);
  });
}

function frame(message: Buffer): Buffer {
  const header = Buffer.alloc(5);
  header.writeUInt32BE(message.length, 1);
  return Buffer.concat([header, message]);
}

// Daemons, pods and pulls of this file leave nothing on the host.
hostCheck('the daemon tests');

describe('daemon', () => {
  let dirs: DaemonDirs;
  let daemon: TestDaemon;

  before(async () => {
    dirs = makeDaemonDirs();
    daemon = await TestDaemon.start(dirs);
  });
  after(async () => {
    await daemon.stop();
    removeDirs(dirs);
  });

  it('answers Version with its name, version and API', async () => {
    const v = await daemon.client.runtime.call('Version', { version: 'v1' });
    assert.equal(v.runtime_name, 'minicri');
    assert.match(v.runtime_version, /^\d+\.\d+\.\d+/);
    assert.equal(v.runtime_api_version, 'v1');
  });

  it('answers Status with both conditions and the config when verbose', async () => {
    const s = await daemon.client.runtime.call('Status', { verbose: true });
    const types = s.status?.conditions.map((c: { type: string }) => c.type);
    assert.deepEqual(types, ['RuntimeReady', 'NetworkReady']);
    const [runtime, network] = s.status!.conditions;
    // runc and conmon are installed: the runtime is ready. The test daemon's conf dir is empty: the network is not, and says why.
    assert.equal(runtime!.status, true, `RuntimeReady false: ${runtime!.reason}: ${runtime!.message}`);
    assert.equal(network!.status, false);
    assert.equal(network!.reason, 'NetworkPluginNotReady');
    assert.equal(network!.message, `no valid CNI network config in ${dirs.base}/net.d`);
    assert.equal(JSON.parse(s.info.config).socket, dirs.socket);
  });

  it('answers RuntimeConfig with the configured cgroup driver', async () => {
    const r = await daemon.client.runtime.call('RuntimeConfig', {});
    assert.equal(r.linux?.cgroup_driver, 'CGROUPFS');
  });

  it('refuses a malformed pod CIDR with INVALID_ARGUMENT', async () => {
    await assert.rejects(
      daemon.client.runtime.call('UpdateRuntimeConfig', { runtime_config: { network_config: { pod_cidr: '10.0.0.0/99' } } }),
      (err) => grpcCode(err) === grpc.status.INVALID_ARGUMENT && /10\.0\.0\.0\/99/.test((err as Error).message),
    );
  });

  it('creates the socket with mode 0660, bound in a private directory that is gone once it serves', () => {
    assert.equal(statSync(dirs.socket).mode & 0o777, 0o660);
    assert.deepEqual(readdirSync(dirname(dirs.socket)).filter((name) => name.startsWith('.sock-')), []);
  });

  it('survives malformed and oversized requests', async () => {
    const garbage = await rawCall(dirs.socket, '/runtime.v1.RuntimeService/Version', frame(Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f])));
    assert.notEqual(garbage, '0', 'a body that is not protobuf must fail');
    const truncated = await rawCall(dirs.socket, '/runtime.v1.RuntimeService/Status', Buffer.from([0, 0, 0, 0, 50, 1]));
    assert.notEqual(truncated, '0');
    const unknown = await rawCall(dirs.socket, '/runtime.v1.RuntimeService/NoSuchMethod', frame(Buffer.alloc(0)));
    assert.equal(unknown, String(grpc.status.UNIMPLEMENTED));
    const huge = Buffer.alloc(17 * 1024 * 1024, 0x41);
    await assert.rejects(daemon.client.runtime.call('Version', { version: huge.toString() }), (err) => grpcCode(err) === grpc.status.RESOURCE_EXHAUSTED);
    const v = await daemon.client.runtime.call('Version', {});
    assert.equal(v.runtime_name, 'minicri');
  });

  it('refuses a second daemon on the same socket and keeps serving', async () => {
    const second = makeDaemonDirs();
    try {
      writeFileSync(second.configPath, `socket = "${dirs.socket}"\nroot_dir = "${second.rootDir}"\nstate_dir = "${second.stateDir}"\n`);
      const result = await runMinicri(['serve', '--config', second.configPath]);
      assert.notEqual(result.code, 0);
      assert.match(result.stderr, /already listening on .*minicri\.sock/);
      assert.equal((await daemon.client.runtime.call('Version', {})).runtime_name, 'minicri');
    } finally {
      removeDirs(second);
    }
  });
});

describe('daemon lifecycle', () => {
  it('keeps state across a restart and exits 0 on SIGTERM, keeping its files', async () => {
    const dirs = makeDaemonDirs();
    try {
      let daemon = await TestDaemon.start(dirs);
      await daemon.client.runtime.call('UpdateRuntimeConfig', { runtime_config: { network_config: { pod_cidr: '10.244.7.0/24' } } });
      assert.equal(await daemon.stop('SIGTERM'), 0);
      assert.ok(existsSync(`${dirs.rootDir}/minicri.db`), 'the state database is kept');
      daemon = await TestDaemon.start(dirs);
      const s = await daemon.client.runtime.call('Status', { verbose: true });
      assert.equal(s.info.podCidr, '10.244.7.0/24');
      assert.equal(await daemon.stop('SIGINT'), 0);
    } finally {
      removeDirs(dirs);
    }
  });

  // The timeout only keeps a daemon that never exits from hanging the run.
  it('exits 0 on SIGTERM while a client (as kubelet) keeps its connection open', { timeout: 20_000 }, async () => {
    const dirs = makeDaemonDirs();
    const daemon = await TestDaemon.start(dirs);
    const kubelet = new CriClient(dirs.socket);
    try {
      await kubelet.runtime.call('Version', {});
      daemon.process.kill('SIGTERM');
      assert.equal(await daemon.exited, 0);
      // The open connection was closed by the exiting daemon, not left half-served.
      await assert.rejects(kubelet.runtime.call('Version', {}, { timeoutMs: 2000 }));
    } finally {
      kubelet.close();
      await daemon.stop();
      removeDirs(dirs);
    }
  });

  it('replaces a stale socket file left by a dead daemon', async () => {
    const dirs = makeDaemonDirs();
    try {
      const daemon = await TestDaemon.start(dirs);
      assert.equal(await daemon.stop('SIGKILL'), -1);
      assert.ok(statSync(dirs.socket).isSocket(), 'SIGKILL leaves the socket file behind');
      const again = await TestDaemon.start(dirs);
      assert.equal((await again.client.runtime.call('Version', {})).runtime_name, 'minicri');
      assert.equal(await again.stop(), 0);
    } finally {
      removeDirs(dirs);
    }
  });

  it('refuses a config file with an unknown key or a bad value, naming the key', async () => {
    const dirs = makeDaemonDirs('[streaming]\naddres = "127.0.0.1"\n');
    try {
      const unknown = await runMinicri(['serve', '--config', dirs.configPath]);
      assert.equal(unknown.code, 2);
      assert.match(unknown.stderr, /unknown config key "streaming\.addres"/);
      writeFileSync(dirs.configPath, 'cgroup_driver = "cgroupsfs"\n');
      const bad = await runMinicri(['serve', '--config', dirs.configPath]);
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /config key "cgroup_driver"/);
      assert.ok(!existsSync(dirs.socket));
    } finally {
      removeDirs(dirs);
    }
  });

  it('prints the effective configuration with flags applied', async () => {
    const dirs = makeDaemonDirs();
    try {
      const out = await runMinicri(['config', '--config', dirs.configPath, '--cgroup-driver', 'systemd', '--cni-bin-dir', '/a,/b']);
      assert.equal(out.code, 0, out.stderr);
      assert.match(out.stdout, /cgroup_driver = "systemd"/);
      assert.match(out.stdout, /bin_dirs = \[ "\/a", "\/b" \]/);
      assert.match(out.stdout, new RegExp(`root_dir = "${dirs.rootDir}"`));
    } finally {
      removeDirs(dirs);
    }
  });
});
