// Manifests and configs are parsed and checked on a worker when they are big (a registry may send 8 MiB of
// JSON, seconds of parsing): the answer is the one the main thread's parse gives, a bad document the same
// InvalidArgument.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidArgument } from '../../../core/errors.js';
import { parseDocument } from '../../../oci/image/manifest.js';
import { parseOffThread } from '../../../oci/image/unpack-pool.js';

const DIFF = `sha256:${'a'.repeat(64)}`;
/** A config of about 1 MiB: far past what is parsed on the main thread. */
const big = Buffer.from(JSON.stringify({
  architecture: 'amd64', os: 'linux',
  config: { Env: Array.from({ length: 50_000 }, (_, i) => `VAR_${i}=value`), Cmd: ['/app'] },
  rootfs: { type: 'layers', diff_ids: [DIFF] },
}));

test('a big config parsed on the worker is what the main thread would make of it', async () => {
  assert.ok(big.length > 512 << 10);
  const job = { kind: 'config' as const, bytes: big, what: 'config of "big"' };
  const off = await parseOffThread(job);
  assert.deepEqual(off, parseDocument(job));
  assert.equal(off.config.env.length, 50_000);
  assert.deepEqual(off.diffIds, [DIFF]);
});

test('a big document that is not valid is InvalidArgument naming it, from the worker too', async () => {
  const broken = Buffer.concat([big, Buffer.from('}')]);
  await assert.rejects(parseOffThread({ kind: 'config', bytes: broken, what: 'config of "broken"' }),
    (e: Error) => e instanceof InvalidArgument && e.message.startsWith('config of "broken" is not valid JSON'));
  const index = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.index.v1+json', manifests: [{ digest: 'nope' }], pad: 'x'.repeat(100_000) }));
  await assert.rejects(parseOffThread({ kind: 'manifest', bytes: index, contentType: undefined, what: 'manifest of "bad"' }),
    (e: Error) => e instanceof InvalidArgument && e.message.startsWith('manifest of "bad" is malformed'));
});

test('a small document is parsed where it is', async () => {
  const small = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.index.v1+json', manifests: [] }));
  assert.deepEqual(await parseOffThread({ kind: 'manifest', bytes: small, contentType: undefined, what: 'm' }), { kind: 'index', index: { schemaVersion: 2, mediaType: 'application/vnd.oci.image.index.v1+json', manifests: [] } });
});
