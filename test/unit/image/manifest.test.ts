import assert from 'node:assert/strict';
import { test } from 'node:test';
import { imageUser } from '../../../oci/image/images.js';
import { MediaType, parseImageConfig, parseManifestOrIndex } from '../../../oci/image/manifest.js';
import { InvalidArgument } from '../../../core/errors.js';

const D = (c: string) => `sha256:${c.repeat(64)}`;
const j = (o: unknown) => Buffer.from(JSON.stringify(o));

test('manifests and indexes are told apart by media type and shape', () => {
  const m = { schemaVersion: 2, config: { mediaType: MediaType.dockerConfig, digest: D('a'), size: 1 }, layers: [{ mediaType: MediaType.dockerLayerGzip, digest: D('b'), size: 2 }] };
  assert.equal(parseManifestOrIndex(j(m), MediaType.dockerManifest, 'm').kind, 'manifest');
  assert.equal(parseManifestOrIndex(j({ ...m, mediaType: MediaType.ociManifest }), undefined, 'm').kind, 'manifest');
  const idx = { schemaVersion: 2, manifests: [{ mediaType: MediaType.ociManifest, digest: D('c'), size: 3, platform: { os: 'linux', architecture: 'amd64' } }] };
  assert.equal(parseManifestOrIndex(j(idx), MediaType.ociIndex, 'i').kind, 'index');
  assert.equal(parseManifestOrIndex(j(idx), undefined, 'i').kind, 'index');
  assert.equal(parseManifestOrIndex(j({ ...idx, mediaType: MediaType.dockerList }), 'application/json', 'i').kind, 'index');
});

test('bad manifests are InvalidArgument saying what is wrong', () => {
  assert.throws(() => parseManifestOrIndex(Buffer.from('{'), undefined, 'manifest of "x"'), (e: Error) => e instanceof InvalidArgument && e.message.includes('manifest of "x" is not valid JSON'));
  assert.throws(() => parseManifestOrIndex(j({ schemaVersion: 1, name: 'x' }), 'application/vnd.docker.distribution.manifest.v1+prettyjws', 'm'), /schema 1/);
  assert.throws(() => parseManifestOrIndex(j({ schemaVersion: 2, config: { mediaType: 'x', digest: 'sha256:zz', size: 1 }, layers: [] }), MediaType.ociManifest, 'm'), /config.digest/);
  const m = { schemaVersion: 2, config: { mediaType: MediaType.ociConfig, digest: D('a'), size: 1 }, layers: [{ mediaType: 'application/vnd.cncf.helm.chart.content.v1.tar+gzip', digest: D('b'), size: 2 }] };
  assert.throws(() => parseManifestOrIndex(j(m), MediaType.ociManifest, 'm'), /unsupported media type/);
});

test('image configs: the parts containers need, nulls tolerated', () => {
  const c = parseImageConfig(j({
    architecture: 'amd64', os: 'linux',
    config: { User: 'www:www', Env: ['A=1'], Entrypoint: null, Cmd: ['run'], ExposedPorts: { '80/tcp': {} }, Volumes: { '/data': {} }, WorkingDir: '/w', Labels: null, StopSignal: 'SIGQUIT' },
    rootfs: { type: 'layers', diff_ids: [D('d')] },
  }), 'c');
  assert.deepEqual(c.config, { entrypoint: [], cmd: ['run'], env: ['A=1'], workingDir: '/w', user: 'www:www', exposedPorts: ['80/tcp'], volumes: ['/data'], stopSignal: 'SIGQUIT', labels: {} });
  assert.deepEqual(c.diffIds, [D('d')]);
  assert.deepEqual(parseImageConfig(j({ rootfs: { type: 'layers', diff_ids: [] } }), 'c').config.cmd, []);
  assert.throws(() => parseImageConfig(j({ config: {} }), 'config x'), /config x is malformed: rootfs/);
});

test('image user: uid or username', () => {
  assert.deepEqual(imageUser(''), {});
  assert.deepEqual(imageUser('0'), { uid: 0 });
  assert.deepEqual(imageUser('1000:1000'), { uid: 1000 });
  assert.deepEqual(imageUser('nobody'), { username: 'nobody' });
  assert.deepEqual(imageUser('app:staff'), { username: 'app' });
});
