import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { test } from 'node:test';
import { parseReference } from '../../../oci/image/reference.js';
import { RegistryClient } from '../../../oci/image/registry.js';
import { DeadlineExceeded } from '../../../core/errors.js';
import { silentLogger } from '../../../core/log.js';
import { startRegistry } from '../../support/registry.js';
import { buildImage, pushImage } from '../../support/test-images.js';

test('a mirror that accepts connections but never answers times out and the next endpoint serves', async (t) => {
  const sockets: Socket[] = [];
  const blackhole = createServer((s) => { sockets.push(s); });
  blackhole.listen(0, '127.0.0.1');
  await once(blackhole, 'listening');
  t.after(() => { for (const s of sockets) s.destroy(); blackhole.close(); });
  const hole = `127.0.0.1:${(blackhole.address() as AddressInfo).port}`;
  const reg = await startRegistry();
  t.after(() => reg.stop());
  const img = await buildImage([{ entries: [{ name: 'x', data: 'x' }] }], {});
  await pushImage(reg, 'slow/x', ['v1'], img);

  const client = new RegistryClient({ hosts: { mirrors: { [reg.host]: { endpoints: [hole] } }, insecure: [] }, log: silentLogger, attempts: 1, manifestTimeoutMs: 300 });
  // The mirror never answers: the manifest comes from the upstream, so the mirror's timeout ended the wait.
  const m = await client.getManifest(parseReference(`${reg.host}/slow/x:v1`), 'v1');
  assert.equal(m.digest, img.manifestDigest);
  assert.equal(m.endpoint.url, reg.url);

  const only = new RegistryClient({ hosts: { mirrors: { [reg.host]: { endpoints: [hole], mirrorsOnly: true } }, insecure: [] }, log: silentLogger, attempts: 1, manifestTimeoutMs: 300 });
  // With no other endpoint the pull's error is the timeout, naming the endpoint, the manifest and the time.
  await assert.rejects(only.getManifest(parseReference(`${reg.host}/slow/x:v1`), 'v1'), (e: Error) =>
    e instanceof DeadlineExceeded && e.message.includes(hole) && e.message.includes('manifest v1') && e.message.includes('0.3 s'));
});
