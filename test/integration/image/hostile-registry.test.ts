// A registry is whoever an image names: a hostile one sends endless error and token bodies, a huge manifest, a
// config of 100 MiB, a manifest of 300 layers. Each pull fails with a clear error naming the limit and its config
// key, the daemon's resident memory grows by less than 64 MiB while it lasts (256 MiB while a config of nearly
// 8 MiB of the densest JSON is parsed, off the event loop), other CRI calls are answered
// within 10 s meanwhile, and nothing of the pull is left. A digest pull of content another pull stored is
// confirmed with the registry using the request's own credentials.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { readdirSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { makeDaemonDirs, removeDirs, TestDaemon, type DaemonDirs } from '../../support/daemon.js';
import { hostCheck } from '../../support/pod-daemon.js';
import { freePort, startRegistry, type TestRegistry } from '../../support/registry.js';
import { startRegistryProxy, type RegistryProxy } from '../../support/registry-proxy.js';
import { rssBytes } from '../../support/rss.js';
import { buildImage, pushImage, type BuiltImage } from '../../support/test-images.js';
import { waitFor } from '../../support/wait.js';

hostCheck('the hostile registry tests');

const MIB = 1 << 20;
/** The documented bound on the daemon's resident memory growth during one attack. */
const RSS_GROWTH_BOUND = 64 * MIB;
/**
 * The documented bound while a config at the limit, of the densest JSON (a million tiny strings), is parsed: the
 * worker's heap holds it for the seconds of the parse (and gives it back when the worker ends, idle).
 */
const DENSE_CONFIG_RSS_BOUND = 256 * MIB;
/** What an endless body sends at most, as fast as it is read. */
const ENDLESS = 2 * 1024 * MIB;
const MANIFEST_TYPE = 'application/vnd.oci.image.manifest.v1+json';
const sha256 = (b: Buffer | string) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

/** A valid config of nearly 8 MiB whose diff ids (none) do not match its manifest's one layer. */
const DENSE_CONFIG = (() => {
  const env: string[] = [];
  for (let n = 0; n < 8 * MIB - 4096; n += env.at(-1)!.length + 3) env.push(`K${env.length}=v`);
  return Buffer.from(JSON.stringify({ architecture: 'amd64', os: 'linux', config: { Env: env }, rootfs: { type: 'layers', diff_ids: [] } }));
})();

interface Hostile { host: string; requests: string[]; sent: Map<string, number>; stop(): Promise<void> }

/** Writes `head`, then `fill` for as long as the reader takes it (up to `limit` bytes), minding back-pressure. */
function endless(res: ServerResponse, key: string, sent: Map<string, number>, head: string, fill: number, limit = ENDLESS): void {
  const chunk = Buffer.alloc(64 << 10, fill);
  let total = 0;
  const pump = () => {
    while (total < limit && !res.destroyed) {
      total += chunk.length;
      sent.set(key, total);
      if (!res.write(chunk)) return void res.once('drain', pump);
    }
    if (!res.destroyed) res.end();
  };
  res.write(head);
  pump();
}

function manifest(config: { digest: string; size: number }, layers: number): Buffer {
  return Buffer.from(JSON.stringify({
    schemaVersion: 2, mediaType: MANIFEST_TYPE,
    config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config },
    layers: Array.from({ length: layers }, (_, i) => ({ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: sha256(`layer ${i}`), size: 1000 })),
  }));
}

async function startHostile(): Promise<Hostile> {
  const requests: string[] = [];
  const sent = new Map<string, number>();
  let origin = '';
  const routes: Record<string, (req: IncomingMessage, res: ServerResponse) => void> = {
    '/v2/huge-error/manifests/v1': (_q, res) => {
      res.writeHead(404, { 'content-type': 'application/json' });
      endless(res, 'error', sent, '{"errors":[{"code":"MANIFEST_UNKNOWN","message":"', 0x78);
    },
    '/v2/huge-token/manifests/v1': (_q, res) => {
      res.writeHead(401, { 'www-authenticate': `Bearer realm="${origin}/token",service="hostile"` }).end();
    },
    '/token': (_q, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      endless(res, 'token', sent, '{"expires_in":1000000000000,"token":"', 0x61);
    },
    '/v2/huge-manifest/manifests/v1': (_q, res) => {
      res.writeHead(200, { 'content-type': MANIFEST_TYPE });
      endless(res, 'manifest', sent, '{"schemaVersion":2,"layers":[],"x":"', 0x61);
    },
    // A config of 100 MiB of JSON: declared so, and served so if asked.
    '/v2/huge-config/manifests/v1': (_q, res) => {
      res.writeHead(200, { 'content-type': MANIFEST_TYPE }).end(manifest({ digest: sha256('config'), size: 100 * MIB }, 1));
    },
    // A config just under the limit, of 8 MiB of environment entries: seconds of parsing, none of it on the event loop.
    '/v2/dense-config/manifests/v1': (_q, res) => {
      res.writeHead(200, { 'content-type': MANIFEST_TYPE }).end(manifest({ digest: sha256(DENSE_CONFIG), size: DENSE_CONFIG.length }, 1));
    },
    [`/v2/dense-config/blobs/${sha256(DENSE_CONFIG)}`]: (_q, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(DENSE_CONFIG);
    },
    '/v2/many-layers/manifests/v1': (_q, res) => {
      res.writeHead(200, { 'content-type': MANIFEST_TYPE }).end(manifest({ digest: sha256('config'), size: 100 }, 300));
    },
  };
  const server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    const path = (req.url ?? '').split('?')[0]!;
    const route = routes[path];
    if (route) return route(req, res);
    if (path.includes('/blobs/')) {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      return endless(res, 'blob', sent, '{"a":"', 0x61, 100 * MIB);
    }
    res.writeHead(404).end();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  origin = `http://${host}`;
  return {
    host, requests, sent,
    async stop() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

const isGrpcError = (e: unknown): e is grpc.ServiceError => typeof (e as grpc.ServiceError)?.code === 'number';

describe('a hostile registry', () => {
  let hostile: Hostile;
  let dirs: DaemonDirs;
  let daemon: TestDaemon;
  const files = (sub: string) => readdirSync(join(dirs.rootDir, 'images', sub), { recursive: true }).map(String).sort();

  before(async () => {
    hostile = await startHostile();
    dirs = makeDaemonDirs();
    daemon = await TestDaemon.start(dirs);
  });
  after(async () => {
    await daemon?.stop();
    if (dirs) removeDirs(dirs);
    await hostile?.stop();
  });

  /**
   * Pulls `repo` while sampling the daemon's memory; once the registry has been asked for `askedFor`, other CRI
   * calls must be answered within 10 s. Returns the pull's error and the peak growth of the daemon's resident memory.
   */
  async function attack(repo: string, askedFor = `/${repo}/`): Promise<{ err: grpc.ServiceError; growth: number }> {
    const pid = daemon.process.pid!;
    const blobs = files('blobs');
    const start = rssBytes(pid);
    let peak = start;
    const sampler = setInterval(() => { peak = Math.max(peak, rssBytes(pid)); }, 10);
    try {
      const pulling = daemon.client.image.call('PullImage', { image: { image: `${hostile.host}/${repo}:v1` } }).then(
        () => assert.fail(`the pull of ${repo} succeeded`), (e: unknown) => e);
      await waitFor(async () => hostile.requests.some((r) => r.includes(askedFor)), 10_000, `the registry asked for ${askedFor}`);
      // The liveness deadline: the daemon answers other calls while the attack lasts.
      const { images } = await daemon.client.image.call('ListImages', {}, { timeoutMs: 10_000 });
      assert.ok(images.length >= 1, 'the built-in pause is listed');
      await daemon.client.image.call('ImageStatus', { image: { image: 'localhost/absent:1' } }, { timeoutMs: 10_000 });
      await daemon.client.runtime.call('ListPodSandbox', {}, { timeoutMs: 10_000 });
      const err = await pulling;
      assert.ok(isGrpcError(err), String(err));
      peak = Math.max(peak, rssBytes(pid));
      // Nothing of the pull is left: no blob, nothing in tmp.
      assert.deepEqual(files('blobs'), blobs);
      assert.deepEqual(files('tmp'), []);
      return { err, growth: peak - start };
    } finally {
      clearInterval(sampler);
    }
  }

  it('an endless error body is read up to 1 MiB and cut short in the message', async (t) => {
    const { err, growth } = await attack('huge-error');
    t.diagnostic(`resident memory grew by ${(growth / MIB).toFixed(1)} MiB; ${err.details}`);
    assert.equal(err.code, grpc.status.NOT_FOUND, err.details);
    assert.match(err.details, /MANIFEST_UNKNOWN/);
    assert.ok(err.details.length < 4096, `a message of ${err.details.length} characters`);
    assert.ok(growth < RSS_GROWTH_BOUND, `resident memory grew by ${growth} bytes`);
    // What the registry got to send: the limit and what the sockets buffer, not the 2 GiB it offered.
    assert.ok(hostile.sent.get('error')! < 32 * MIB, `${hostile.sent.get('error')} bytes sent`);
  });

  it('an endless token body is refused naming registries.max_response_bytes', async (t) => {
    const { err, growth } = await attack('huge-token');
    t.diagnostic(`resident memory grew by ${(growth / MIB).toFixed(1)} MiB; ${err.details}`);
    assert.equal(err.code, grpc.status.RESOURCE_EXHAUSTED, err.details);
    assert.match(err.details, /token .* is over 1048576 bytes, the limit registries\.max_response_bytes sets/);
    assert.ok(growth < RSS_GROWTH_BOUND, `resident memory grew by ${growth} bytes`);
    assert.ok(hostile.sent.get('token')! < 32 * MIB, `${hostile.sent.get('token')} bytes sent`);
  });

  it('an endless manifest is refused naming registries.max_manifest_bytes', async (t) => {
    const { err, growth } = await attack('huge-manifest');
    t.diagnostic(`resident memory grew by ${(growth / MIB).toFixed(1)} MiB; ${err.details}`);
    assert.equal(err.code, grpc.status.RESOURCE_EXHAUSTED, err.details);
    assert.match(err.details, /is over 4194304 bytes, the limit registries\.max_manifest_bytes sets/);
    assert.ok(growth < RSS_GROWTH_BOUND, `resident memory grew by ${growth} bytes`);
    assert.ok(hostile.sent.get('manifest')! < 32 * MIB, `${hostile.sent.get('manifest')} bytes sent`);
  });

  it('a config of 100 MiB is refused naming registries.max_config_bytes, before a byte of it is fetched', async (t) => {
    const { err, growth } = await attack('huge-config');
    t.diagnostic(`resident memory grew by ${(growth / MIB).toFixed(1)} MiB; ${err.details}`);
    assert.equal(err.code, grpc.status.RESOURCE_EXHAUSTED, err.details);
    assert.match(err.details, new RegExp(`config .* has ${100 * MIB} bytes, over ${8 * MIB}, the limit registries\\.max_config_bytes sets`));
    assert.ok(growth < RSS_GROWTH_BOUND, `resident memory grew by ${growth} bytes`);
    assert.ok(!hostile.requests.some((r) => r.includes('/huge-config/blobs/')), 'the config was never asked for');
  });

  it('a config of nearly 8 MiB of JSON is parsed off the event loop: other calls are answered meanwhile', async (t) => {
    // Asked while the config is being parsed.
    const { err, growth } = await attack('dense-config', '/dense-config/blobs/');
    t.diagnostic(`resident memory grew by ${(growth / MIB).toFixed(1)} MiB; ${err.details}`);
    assert.equal(err.code, grpc.status.INVALID_ARGUMENT, err.details);
    assert.match(err.details, /lists 1 layers but its config has 0 diff ids/);
    assert.ok(growth < DENSE_CONFIG_RSS_BOUND, `resident memory grew by ${growth} bytes`);
  });

  it('a manifest of 300 layers is refused naming registries.max_layers', async (t) => {
    const { err, growth } = await attack('many-layers');
    t.diagnostic(`resident memory grew by ${(growth / MIB).toFixed(1)} MiB; ${err.details}`);
    assert.equal(err.code, grpc.status.RESOURCE_EXHAUSTED, err.details);
    assert.match(err.details, /has 300 layers, over 200, the limit registries\.max_layers sets/);
    assert.ok(growth < RSS_GROWTH_BOUND, `resident memory grew by ${growth} bytes`);
    assert.ok(!hostile.requests.some((r) => r.includes('/many-layers/blobs/')), 'no blob was asked for');
  });
});

describe('the limits are the config keys their refusals name', () => {
  let hostile: Hostile;
  let dirs: DaemonDirs;
  let daemon: TestDaemon;
  before(async () => {
    hostile = await startHostile();
    dirs = makeDaemonDirs('[registries]\nmax_response_bytes = 4096\nmax_layers = 100');
    daemon = await TestDaemon.start(dirs);
  });
  after(async () => {
    await daemon?.stop();
    if (dirs) removeDirs(dirs);
    await hostile?.stop();
  });

  it('refuses at the configured sizes and counts', async () => {
    const refusal = (repo: string) => daemon.client.image.call('PullImage', { image: { image: `${hostile.host}/${repo}:v1` } })
      .then(() => assert.fail(`pulled ${repo}`), (e: unknown) => e as grpc.ServiceError);
    const token = await refusal('huge-token');
    assert.equal(token.code, grpc.status.RESOURCE_EXHAUSTED, token.details);
    assert.match(token.details, /is over 4096 bytes, the limit registries\.max_response_bytes sets/);
    const layers = await refusal('many-layers');
    assert.match(layers.details, /has 300 layers, over 100, the limit registries\.max_layers sets/);
  });
});

describe('a digest pull of content another pull stored', () => {
  let reg: TestRegistry;
  let proxy: RegistryProxy;
  let img: BuiltImage;
  let dirs: DaemonDirs;
  let daemon: TestDaemon;
  const creds = { username: 'alice', password: 's3cret' };

  before(async () => {
    reg = await startRegistry({ auth: { kind: 'htpasswd', ...creds } });
    img = await buildImage([{ entries: [{ name: 'secret', data: 'tenant A only\n' }] }], { Cmd: ['/secret'] });
    await pushImage(reg, 'private/app', ['v1'], img);
    // In front of the registry, recording what the daemon asks for.
    proxy = await startRegistryProxy(reg.url);
    dirs = makeDaemonDirs();
    daemon = await TestDaemon.start(dirs);
  });
  after(async () => {
    await daemon?.stop();
    if (dirs) removeDirs(dirs);
    await proxy?.stop();
    await reg?.stop();
  });

  it('is confirmed with the registry using the request\'s credentials: refused without them, served with them from the store', async () => {
    const byDigest = `${proxy.host}/private/app@${img.manifestDigest}`;
    const pulled = await daemon.client.image.call('PullImage', { image: { image: byDigest }, auth: creds });
    assert.equal(pulled.image_ref, img.configDigest);

    const refusal = (e: unknown) => e as grpc.ServiceError;
    const byTag = refusal(await daemon.client.image.call('PullImage', { image: { image: `${proxy.host}/private/app:v1` } }).then(() => assert.fail('pulled'), (e: unknown) => e));
    const asked = proxy.requests.length;
    const denied = refusal(await daemon.client.image.call('PullImage', { image: { image: byDigest } }).then(() => assert.fail('pulled'), (e: unknown) => e));
    assert.equal(denied.code, grpc.status.PERMISSION_DENIED, denied.details);
    assert.equal(denied.code, byTag.code, 'as a tag pull without credentials is');
    assert.match(denied.details, /check the pull credentials/);
    assert.ok(proxy.requests.slice(asked).some((r) => r.path === `/v2/private/app/manifests/${img.manifestDigest}`), 'the registry was asked');

    const again = proxy.requests.length;
    const repulled = await daemon.client.image.call('PullImage', { image: { image: byDigest }, auth: creds });
    assert.equal(repulled.image_ref, img.configDigest);
    const since = proxy.requests.slice(again).map((r) => r.path);
    assert.ok(since.includes(`/v2/private/app/manifests/${img.manifestDigest}`), JSON.stringify(since));
    assert.ok(!since.some((p) => p.includes('/blobs/')), `no blob downloaded again: ${JSON.stringify(since)}`);
  });

  it('fails UNAVAILABLE when no endpoint answers, as a tag pull does, though the store has the content', async () => {
    const closed = `127.0.0.1:${await freePort()}`;
    const err = await daemon.client.image.call('PullImage', { image: { image: `${closed}/private/app@${img.manifestDigest}` }, auth: creds })
      .then(() => assert.fail('pulled'), (e: unknown) => e as grpc.ServiceError);
    assert.equal(err.code, grpc.status.UNAVAILABLE, err.details);
  });
});
