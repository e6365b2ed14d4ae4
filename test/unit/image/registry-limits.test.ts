// What the registry client reads of a registry's answers is bounded: an error body is cut at the response limit
// for its message, a token or a manifest over its limit is refused naming the limit's config key, and never is
// more read than the limit. A digest the store has is confirmed with HEAD (GET where HEAD is not allowed).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { NotFound, PermissionDenied, ResourceExhausted } from '../../../core/errors.js';
import { silentLogger } from '../../../core/log.js';
import type { HttpAnswer, HttpInit, Transport } from '../../../oci/image/http.js';
import { parseReference } from '../../../oci/image/reference.js';
import { RegistryClient } from '../../../oci/image/registry.js';

const REGISTRY = '127.0.0.1:5999';
const ORIGIN = `http://${REGISTRY}`;
const MIB = 1 << 20;

/** A body that never ends, counting what was read of it. */
function endless(fill: string): { body: Readable; read: () => number } {
  let read = 0;
  const chunk = Buffer.alloc(64 << 10, fill);
  const body = new Readable({ read() { read += chunk.length; this.push(chunk); } });
  return { body, read: () => read };
}

function answer(status: number, body: Readable | Buffer, headers: Record<string, string> = {}): HttpAnswer {
  const stream = Buffer.isBuffer(body) ? Readable.from([body]) : body;
  return {
    status,
    headers: { get: (name) => headers[name.toLowerCase()] ?? null },
    body: stream,
    discard: async () => { stream.destroy(); },
  };
}

function client(transport: Transport): { client: RegistryClient; asked: Array<{ method: string; url: string; auth?: string }> } {
  const asked: Array<{ method: string; url: string; auth?: string }> = [];
  const recording: Transport = (url, init: HttpInit) => {
    asked.push({ method: init.method ?? 'GET', url: url.pathname, auth: init.headers.authorization });
    return transport(url, init);
  };
  return { client: new RegistryClient({ hosts: { mirrors: {}, insecure: [] }, log: silentLogger, transport: recording, attempts: 1 }), asked };
}

const ref = parseReference(`${REGISTRY}/app:v1`);

test('an endless error body is read up to the response limit and cut short for the message', async () => {
  const huge = endless('e');
  const { client: c } = client(async () => answer(404, huge.body));
  await assert.rejects(c.getManifest(ref, 'v1'), (e: Error) => e instanceof NotFound && e.message.includes('eeee'));
  assert.ok(huge.read() <= MIB + (256 << 10), `read ${huge.read()} bytes`);
  assert.ok(huge.body.destroyed, 'the connection is given up');
});

test('an endless token body is refused naming the limit and its key, after reading at most the limit', async () => {
  const huge = endless('t');
  const { client: c } = client(async (url) => (url.pathname === '/token'
    ? answer(200, huge.body)
    : answer(401, Buffer.alloc(0), { 'www-authenticate': `Bearer realm="${ORIGIN}/token",service="test"` })));
  await assert.rejects(c.getManifest(ref, 'v1'), (e: Error) =>
    e instanceof ResourceExhausted && e.message.includes('registries.max_response_bytes') && e.message.includes(`${MIB} bytes`));
  assert.ok(huge.read() <= MIB + (256 << 10), `read ${huge.read()} bytes`);
});

test('a token body that says its size is refused before a byte of it is read', async () => {
  const huge = endless('t');
  const { client: c } = client(async (url) => (url.pathname === '/token'
    ? answer(200, huge.body, { 'content-length': String(3 * 1024 * MIB) })
    : answer(401, Buffer.alloc(0), { 'www-authenticate': `Bearer realm="${ORIGIN}/token"` })));
  await assert.rejects(c.getManifest(ref, 'v1'), (e: Error) => e instanceof ResourceExhausted && e.message.includes(`has ${3 * 1024 * MIB} bytes`));
  assert.ok(huge.read() <= 256 << 10);
});

test('a manifest over its limit is refused naming registries.max_manifest_bytes', async () => {
  const huge = endless('{');
  const { client: c } = client(async () => answer(200, huge.body));
  await assert.rejects(c.getManifest(ref, 'v1'), (e: Error) => e instanceof ResourceExhausted && e.message.includes('registries.max_manifest_bytes'));
  assert.ok(huge.read() <= 4 * MIB + (256 << 10), `read ${huge.read()} bytes`);
});

const MANIFEST = Buffer.from('{"schemaVersion":2}');
const DIGEST = `sha256:${createHash('sha256').update(MANIFEST).digest('hex')}`;

/** A registry that serves the manifest only to `allowed`, challenging any other request with `challenge`. */
function guarded(allowed: string, challenge: string): Transport {
  return async (url, init) => {
    if (url.pathname === '/token') {
      const token = init.headers.authorization === `Basic ${Buffer.from('a:b').toString('base64')}` ? 'for-a' : 'anonymous';
      return answer(200, Buffer.from(JSON.stringify({ token })));
    }
    return init.headers.authorization === allowed
      ? answer(200, Buffer.alloc(0), { 'docker-content-digest': DIGEST })
      : answer(401, Buffer.alloc(0), { 'www-authenticate': challenge });
  };
}

const HEAD = `HEAD /v2/app/manifests/${DIGEST}`;

test('a stored digest is confirmed with one HEAD, with the credentials of the pull', async () => {
  const { client: c, asked } = client(guarded(`Basic ${Buffer.from('a:b').toString('base64')}`, 'Basic realm="r"'));
  const e = await c.confirmManifest(ref, DIGEST, { username: 'a', password: 'b' });
  assert.equal(e.url, ORIGIN);
  assert.deepEqual(asked.map((a) => `${a.method} ${a.url} ${a.auth}`), [`${HEAD} undefined`, `${HEAD} Basic YTpi`]);
});

test("a digest behind a bearer challenge is confirmed with the token the pull's credentials get", async () => {
  const { client: c, asked } = client(guarded('Bearer for-a', `Bearer realm="${ORIGIN}/token",service="test"`));
  assert.equal((await c.confirmManifest(ref, DIGEST, { username: 'a', password: 'b' })).url, ORIGIN);
  assert.deepEqual(asked.map((a) => `${a.method} ${a.url} ${a.auth}`), [`${HEAD} undefined`, 'GET /token Basic YTpi', `${HEAD} Bearer for-a`]);
});

test('an anonymous pull from a public registry confirms the digest with an anonymous token', async () => {
  const { client: c, asked } = client(guarded('Bearer anonymous', `Bearer realm="${ORIGIN}/token",service="test"`));
  assert.equal((await c.confirmManifest(ref, DIGEST)).url, ORIGIN);
  assert.deepEqual(asked.map((a) => `${a.method} ${a.url} ${a.auth}`), [`${HEAD} undefined`, 'GET /token undefined', `${HEAD} Bearer anonymous`]);
});

test('a registry that does not allow HEAD is asked with GET, and the bytes must have the digest', async () => {
  const { client: c, asked } = client(async (_url, init) => (init.method === 'HEAD' ? answer(405, Buffer.alloc(0)) : answer(200, MANIFEST)));
  assert.equal((await c.confirmManifest(ref, DIGEST)).url, ORIGIN);
  assert.deepEqual(asked.map((a) => a.method), ['HEAD', 'GET']);
  const other = `sha256:${'0'.repeat(64)}`;
  await assert.rejects(c.confirmManifest(ref, other), /not the requested/);
});

test('a registry refusing the digest to these credentials refuses the pull', async () => {
  const { client: c } = client(async () => answer(401, Buffer.alloc(0), { 'www-authenticate': 'Basic realm="r"' }));
  await assert.rejects(c.confirmManifest(ref, DIGEST), (e: Error) => e instanceof PermissionDenied && e.message.includes('check the pull credentials'));
});
