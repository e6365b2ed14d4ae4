// Credentials reach only the host they were given for; node-level credentials come from a Docker config.json;
// a mirror's own CA is trusted through certs.d.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { PermissionDenied, Unavailable } from '../../../core/errors.js';
import { imageEnv } from '../../support/image-env.js';
import { startRegistry, type TestRegistry } from '../../support/registry.js';
import { makeTestCa, startRegistryProxy } from '../../support/registry-proxy.js';
import { buildImage, pushImage, type BuiltImage } from '../../support/test-images.js';

const ALICE = { username: 'alice', password: 's3cret' };
const ALICE_BASIC = `Basic ${Buffer.from('alice:s3cret').toString('base64')}`;

let img: BuiltImage;
let privateReg: TestRegistry;
let openReg: TestRegistry;
let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'minicri-creds-'));
  img = await buildImage([{ entries: [{ name: 'hello', data: 'hello\n' }] }], { Cmd: ['/hello'] });
  privateReg = await startRegistry({ auth: { kind: 'htpasswd', ...ALICE } });
  openReg = await startRegistry();
  for (const reg of [privateReg, openReg]) await pushImage(reg, 'private/hello', ['v1'], img);
});
after(async () => {
  await privateReg?.stop();
  await openReg?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('request credentials', () => {
  test('credentials for registry A never reach its mirror B', async (t) => {
    // The mirror asks for credentials (it fronts a registry that wants them): it must not get A's.
    const mirror = await startRegistryProxy(privateReg.url);
    t.after(() => mirror.stop());
    const { images } = await imageEnv(t, { mirrors: { [privateReg.host]: { endpoints: [mirror.url] } }, insecure: [] });
    const r = await images.pull(`${privateReg.host}/private/hello:v1`, { ...ALICE, serverAddress: privateReg.host });
    assert.equal(r.id, img.configDigest);
    assert.ok(mirror.requests.length >= 1, 'the mirror was asked first');
    assert.deepEqual(mirror.requests.filter((q) => q.authorization), [], 'no Authorization at the mirror');
  });

  test('credentials go to the registry they name, and nowhere else; a blob redirect carries none', async (t) => {
    const front = await startRegistryProxy(privateReg.url, { redirectBlobs: true, storageAuthorization: ALICE_BASIC });
    t.after(() => front.stop());
    const { images } = await imageEnv(t);
    const r = await images.pull(`${front.host}/private/hello:v1`, { ...ALICE, serverAddress: `http://${front.host}/v2/` });
    assert.equal(r.id, img.configDigest);
    assert.ok(front.requests.some((q) => q.authorization === ALICE_BASIC), 'the registry got the credentials');
    assert.ok(front.storageRequests.length >= 2, 'blobs came from the redirect target');
    assert.deepEqual(front.storageRequests.filter((q) => q.authorization), [], 'no Authorization at the redirect target');

    const env2 = await imageEnv(t);
    const before = front.requests.length;
    await assert.rejects(env2.images.pull(`${front.host}/private/hello:v1`, { ...ALICE, serverAddress: 'other.example.com' }), PermissionDenied);
    assert.deepEqual(front.requests.slice(before).filter((q) => q.authorization), [], 'credentials for another host are not sent');
  });

  test('a 401 from where a blob was redirected is not answered with the registry\'s credentials', async (t) => {
    const front = await startRegistryProxy(privateReg.url, { redirectBlobs: true, storageChallenges: true });
    t.after(() => front.stop());
    const { images } = await imageEnv(t);
    await assert.rejects(images.pull(`${front.host}/private/hello:v1`, { ...ALICE, serverAddress: front.host }), (err: unknown) =>
      err instanceof PermissionDenied && /401 from http:\/\/localhost:\d+, where http:\/\/127\.0\.0\.1:\d+ redirected/.test(err.message));
    assert.ok(front.storageRequests.length >= 1, 'the blob read was redirected');
    assert.deepEqual(front.storageRequests.filter((q) => q.authorization || q.path.startsWith('/token')), [], 'no credentials and no token request at the redirect target\'s realm');
  });
});

describe('node-level credentials file', () => {
  test('authenticate a pull sent without credentials, and only at their host', async (t) => {
    const authFile = join(dir, 'auth.json');
    await writeFile(authFile, JSON.stringify({ auths: { [`http://${privateReg.host}`]: { auth: Buffer.from('alice:s3cret').toString('base64') } } }));
    const mirror = await startRegistryProxy(privateReg.url);
    t.after(() => mirror.stop());
    const { images } = await imageEnv(t, { mirrors: { [privateReg.host]: { endpoints: [mirror.url] } }, insecure: [], authFile });
    // The mirror wants credentials and has none filed for it: the registry itself answers, with the file's.
    const r = await images.pull(`${privateReg.host}/private/hello:v1`);
    assert.equal(r.id, img.configDigest);
    assert.ok(mirror.requests.length >= 1, 'the mirror was asked first');
    assert.deepEqual(mirror.requests.filter((q) => q.authorization), [], 'the registry\'s credentials never reach the mirror');

    const { images: none } = await imageEnv(t, { mirrors: {}, insecure: [], authFile: join(dir, 'missing.json') });
    await assert.rejects(none.pull(`${privateReg.host}/private/hello:v1`), PermissionDenied, 'a missing file is no credentials');
  });

  test('a mirror gets the credentials filed for the mirror', async (t) => {
    const mirror = await startRegistryProxy(privateReg.url);
    t.after(() => mirror.stop());
    const authFile = join(dir, 'mirror-auth.json');
    await writeFile(authFile, JSON.stringify({ auths: { [mirror.host]: { username: 'alice', password: 's3cret' } } }));
    const { images } = await imageEnv(t, { mirrors: { 'registry.example.com': { endpoints: [mirror.url], mirrorsOnly: true } }, insecure: [], authFile });
    const r = await images.pull('registry.example.com/private/hello:v1');
    assert.equal(r.id, img.configDigest);
    assert.ok(mirror.requests.some((q) => q.authorization === ALICE_BASIC));
  });
});

describe('per-host TLS from certs.d', () => {
  test('a mirror with its own CA is trusted through certs.d; without it the pull is refused naming the host', async (t) => {
    const caDir = join(dir, 'ca');
    await mkdir(caDir);
    const ca = await makeTestCa(caDir);
    const mirror = await startRegistryProxy(openReg.url, { tls: { key: ca.key, cert: ca.cert } });
    t.after(() => mirror.stop());
    const certsDir = join(dir, 'certs.d');
    const mirrors = { 'registry.example.com': { endpoints: [mirror.url], mirrorsOnly: true } };

    const { images: untrusting } = await imageEnv(t, { mirrors, insecure: [], certsDir });
    await assert.rejects(untrusting.pull('registry.example.com/private/hello:v1'), (e: Error) =>
      e instanceof Unavailable && e.message.includes(`TLS to ${mirror.host}`) && e.message.includes(join(certsDir, mirror.host)));
    assert.deepEqual(mirror.requests, [], 'nothing was sent over the untrusted connection');

    await mkdir(join(certsDir, mirror.host), { recursive: true });
    await writeFile(join(certsDir, mirror.host, 'ca.crt'), ca.caCert);
    const { images } = await imageEnv(t, { mirrors, insecure: [], certsDir });
    const r = await images.pull('registry.example.com/private/hello:v1');
    assert.equal(r.id, img.configDigest);

    // insecure: an https endpoint whose certificate is not verified.
    const { images: skipping } = await imageEnv(t, { mirrors, insecure: [mirror.host] });
    assert.equal((await skipping.pull('registry.example.com/private/hello:v1')).id, img.configDigest);
  });
});
