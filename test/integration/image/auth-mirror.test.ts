import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { NotFound, PermissionDenied, Unavailable } from '../../../core/errors.js';
import { imageEnv } from '../../support/image-env.js';
import { freePort, startRegistry, type TestRegistry } from '../../support/registry.js';
import { startFlakyProxy } from '../../support/image-proxy.js';
import { buildImage, pushImage, type BuiltImage } from '../../support/test-images.js';

let img: BuiltImage;
before(async () => {
  img = await buildImage([{ entries: [{ name: 'hello', data: 'hello\n' }] }], { Cmd: ['/hello'] });
});

describe('registry behind htpasswd basic auth', () => {
  let reg: TestRegistry;
  before(async () => {
    reg = await startRegistry({ auth: { kind: 'htpasswd', username: 'alice', password: 's3cret' } });
    await pushImage(reg, 'private/hello', ['v1'], img);
  });
  after(async () => { await reg?.stop(); });

  test('pulls with username/password and with the base64 auth field', async (t) => {
    const { images } = await imageEnv(t);
    const r = await images.pull(`${reg.host}/private/hello:v1`, { username: 'alice', password: 's3cret' });
    assert.equal(r.id, img.configDigest);
    const env2 = await imageEnv(t);
    const r2 = await env2.images.pull(`${reg.host}/private/hello:v1`, { auth: Buffer.from('alice:s3cret').toString('base64') });
    assert.equal(r2.id, img.configDigest);
  });

  test('no or wrong credentials are PermissionDenied with the registry message', async (t) => {
    const { images } = await imageEnv(t);
    await assert.rejects(images.pull(`${reg.host}/private/hello:v1`), (e: Error) => e instanceof PermissionDenied && /401/.test(e.message) && /UNAUTHORIZED/.test(e.message));
    await assert.rejects(images.pull(`${reg.host}/private/hello:v1`, { username: 'alice', password: 'nope' }), PermissionDenied);
  });
});

describe('registry behind a bearer token server', () => {
  let reg: TestRegistry;
  before(async () => {
    reg = await startRegistry({ auth: { kind: 'token', username: 'bob', password: 'hunter2', identityToken: 'refresh-me' } });
    await pushImage(reg, 'tok/hello', ['v1'], img);
  });
  after(async () => { await reg?.stop(); });

  test('pulls through the token flow; a second pull reuses the token', async (t) => {
    const { images, requests } = await imageEnv(t);
    const r = await images.pull(`${reg.host}/tok/hello:v1`, { username: 'bob', password: 'hunter2' });
    assert.equal(r.id, img.configDigest);
    assert.equal(requests.filter((u) => u.startsWith(reg.tokenUrl!)).length, 1, 'one token for the whole pull');
    await images.pull(`${reg.host}/tok/hello:v1`, { username: 'bob', password: 'hunter2' });
    assert.equal(requests.filter((u) => u.startsWith(reg.tokenUrl!)).length, 1, 'token reused by the next pull');
    await assert.rejects(images.pull(`${reg.host}/tok/hello:v1`), PermissionDenied, 'a cached token never serves a pull without credentials');
  });

  test('an identity token is exchanged at the token server', async (t) => {
    const { images } = await imageEnv(t);
    const r = await images.pull(`${reg.host}/tok/hello:v1`, { identityToken: 'refresh-me' });
    assert.equal(r.id, img.configDigest);
    const env2 = await imageEnv(t);
    await assert.rejects(env2.images.pull(`${reg.host}/tok/hello:v1`, { identityToken: 'stale' }), PermissionDenied);
  });

  test('a registry token is sent as is', async (t) => {
    const { images } = await imageEnv(t);
    const token = (await reg.pushAuthorization('tok/hello'))!.slice('Bearer '.length);
    const r = await images.pull(`${reg.host}/tok/hello:v1`, { registryToken: token });
    assert.equal(r.id, img.configDigest);
  });

  test('wrong credentials are PermissionDenied naming the token server', async (t) => {
    const { images } = await imageEnv(t);
    await assert.rejects(images.pull(`${reg.host}/tok/hello:v1`, { username: 'bob', password: 'x' }), (e: Error) =>
      e instanceof PermissionDenied && e.message.includes('token server') && e.message.includes('invalid username or password'));
  });
});

describe('mirrors', () => {
  let reg: TestRegistry;
  before(async () => {
    reg = await startRegistry();
    await pushImage(reg, 'pause', ['3.10'], img);
    await pushImage(reg, 'library/busybox', ['1.36'], img);
  });
  after(async () => { await reg?.stop(); });

  test('a mirrors-only registry is served by its mirror under the requested name; nothing goes upstream', async (t) => {
    const dead = await freePort();
    const { images, requests } = await imageEnv(t, {
      mirrors: { 'registry.k8s.io': { endpoints: [`127.0.0.1:${dead}`, reg.url], mirrorsOnly: true } },
      insecure: [],
    });
    const r = await images.pull('registry.k8s.io/pause:3.10');
    assert.deepEqual(r.repoTags, ['registry.k8s.io/pause:3.10']);
    assert.deepEqual(r.repoDigests, [`registry.k8s.io/pause@${img.manifestDigest}`]);
    assert.ok(requests.every((u) => u.startsWith('http://127.0.0.1:')), requests.join('\n'));
    assert.ok(requests.some((u) => u.startsWith(`http://127.0.0.1:${dead}/`)), 'first mirror tried');
    assert.equal(images.status('registry.k8s.io/pause:3.10')?.id, img.configDigest);
  });

  test('a blob the mirror lacks comes from the registry itself', async (t) => {
    const upstream = await startRegistry();
    t.after(() => upstream.stop());
    const fb = await buildImage([{ entries: [{ name: 'fallback', data: 'yes' }] }], { Cmd: ['/fallback'] });
    await pushImage(reg, 'test/fallback', ['v1'], fb);
    await pushImage(upstream, 'test/fallback', ['v1'], fb);
    const del = await fetch(`${reg.url}/v2/test/fallback/blobs/${fb.layerDigests[0]}`, { method: 'DELETE' });
    assert.equal(del.status, 202);
    const { images, requests } = await imageEnv(t, { mirrors: { [upstream.host]: { endpoints: [reg.url] } }, insecure: [] });
    const r = await images.pull(`${upstream.host}/test/fallback:v1`);
    assert.equal(r.id, fb.configDigest);
    assert.deepEqual(r.repoTags, [`${upstream.host}/test/fallback:v1`]);
    assert.deepEqual(requests.map((u) => u.slice(0, u.indexOf('/v2/'))), [reg.url, reg.url, reg.url, upstream.url], requests.join('\n'));
  });

  test('docker.io names map to library/ on the mirror', async (t) => {
    const { images, requests } = await imageEnv(t, { mirrors: { 'docker.io': { endpoints: [reg.host] } }, insecure: [] });
    const r = await images.pull('busybox:1.36');
    assert.deepEqual(r.repoTags, ['docker.io/library/busybox:1.36']);
    assert.ok(requests.every((u) => u.startsWith(reg.url)), requests.join('\n'));
  });

  test('unreachable mirrors are each named; unknown images on a mirror are NotFound', async (t) => {
    const dead1 = await freePort();
    const dead2 = await freePort();
    const { images, requests } = await imageEnv(t, {
      mirrors: { 'registry.k8s.io': { endpoints: [`127.0.0.1:${dead1}`, `http://127.0.0.1:${dead2}`], mirrorsOnly: true }, 'quay.io': { endpoints: [reg.host], mirrorsOnly: true } },
      insecure: [],
    });
    await assert.rejects(images.pull('registry.k8s.io/pause:3.10'), (e: Error) =>
      e instanceof Unavailable && e.message.includes(`mirror http://127.0.0.1:${dead1}`) && e.message.includes(`mirror http://127.0.0.1:${dead2}`) && /ECONNREFUSED/.test(e.message) && /mirrors only/.test(e.message));
    await assert.rejects(images.pull('quay.io/nothing/here:1'), (e: Error) => e instanceof NotFound && e.message.includes('quay.io/nothing/here:1'));
    assert.ok(requests.every((u) => u.startsWith('http://127.0.0.1:')));
  });
});

describe('redirects and transient failures', () => {
  let reg: TestRegistry;
  before(async () => {
    reg = await startRegistry();
    await pushImage(reg, 'flaky/hello', ['v1'], img);
  });
  after(async () => { await reg?.stop(); });

  test('blobs follow redirects to another origin without credentials; 503s are retried', async (t) => {
    const proxy = await startFlakyProxy(reg.url);
    t.after(() => proxy.stop());
    const { images } = await imageEnv(t);
    const r = await images.pull(`${proxy.host}/flaky/hello:v1`, { registryToken: 'not-for-storage' });
    assert.equal(r.id, img.configDigest);
    assert.ok(proxy.failures >= 1, 'some requests failed transiently');
    assert.deepEqual(proxy.leakedAuth, [], 'no Authorization sent to the redirect target');
  });
});
