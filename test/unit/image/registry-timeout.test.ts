// The manifest time per endpoint: an endpoint that does not answer in it is passed over for the next, and when
// none answers the pull fails with DeadlineExceeded naming endpoint, manifest and time; the caller's own
// cancel ends the fetch at once with its reason.
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { Cancelled, DeadlineExceeded, NotFound } from '../../../core/errors.js';
import { silentLogger } from '../../../core/log.js';
import type { HttpAnswer, HttpInit, Transport } from '../../../oci/image/http.js';
import { parseReference } from '../../../oci/image/reference.js';
import { RegistryClient } from '../../../oci/image/registry.js';

const MIRROR = 'http://127.0.0.1:5001';
const REGISTRY = 'registry.example.com';
const MANIFEST = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json' }));

function answer(status: number, body: Buffer): HttpAnswer {
  return {
    status,
    headers: { get: (name) => (name === 'content-type' ? 'application/vnd.oci.image.manifest.v1+json' : null) },
    body: Readable.from([body]),
    discard: async () => undefined,
  };
}

/** Never answers: fails only when the request's signal aborts, as a connection given up on does. */
function hang(init: HttpInit): Promise<HttpAnswer> {
  return new Promise((_resolve, reject) => {
    init.signal?.addEventListener('abort', () => reject(new Error('This operation was aborted')), { once: true });
  });
}

function client(transport: Transport, mirrorsOnly: boolean): { client: RegistryClient; asked: string[] } {
  const asked: string[] = [];
  const recording: Transport = (url, init) => { asked.push(url.origin); return transport(url, init); };
  return {
    client: new RegistryClient({
      hosts: { mirrors: { [REGISTRY]: { endpoints: [MIRROR], mirrorsOnly } }, insecure: [REGISTRY] },
      log: silentLogger, manifestTimeoutMs: 50, transport: recording,
    }),
    asked,
  };
}

const ref = parseReference(`${REGISTRY}/app:v1`);

test('a mirror that does not answer in the manifest time is passed over; the registry serves the manifest', async () => {
  const { client: c, asked } = client((url, init) => (url.origin === MIRROR ? hang(init) : Promise.resolve(answer(200, MANIFEST))), false);
  const m = await c.getManifest(ref, 'v1');
  assert.equal(m.endpoint.url, `http://${REGISTRY}`);
  assert.deepEqual(MANIFEST, m.bytes);
  // Not retried at the mirror: its time was up.
  assert.deepEqual(asked, [MIRROR, `http://${REGISTRY}`]);
});

test('when no endpoint answers in time the fetch fails with DeadlineExceeded naming endpoint, manifest and time', async () => {
  const { client: c, asked } = client((_url, init) => hang(init), true);
  await assert.rejects(c.getManifest(ref, 'v1'), (e: Error) =>
    e instanceof DeadlineExceeded && e.message.includes(MIRROR) && e.message.includes('manifest v1') && e.message.includes('0.05 s') && !/aborted/.test(e.message));
  assert.deepEqual(asked, [MIRROR]);
});

test('the caller cancelling ends the fetch with its reason, without trying the next endpoint', async () => {
  const controller = new AbortController();
  const reason = new Cancelled('the client gave up');
  const { client: c, asked } = client((_url, init) => { setImmediate(() => controller.abort(reason)); return hang(init); }, false);
  await assert.rejects(c.getManifest(ref, 'v1', undefined, undefined, controller.signal), (e) => e === reason);
  assert.deepEqual(asked, [MIRROR]);
});

test('a mirror out of time and the registry itself without the image: NotFound, not a timeout', async () => {
  const { client: c, asked } = client((url, init) => (url.origin === MIRROR ? hang(init) : Promise.resolve(answer(404, Buffer.from('{}')))), false);
  await assert.rejects(c.getManifest(ref, 'v1'), (e: Error) => e instanceof NotFound && e.message.includes('not found'));
  assert.deepEqual(asked, [MIRROR, `http://${REGISTRY}`]);
});
