// Image volumes in the spec: the sub path kept inside the image, and the read-only bind mount binaries can run from.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidArgument } from '../../../core/errors.js';
import { imageSubPath, withImageVolumes } from '../../../oci/runtime/spec/image-volumes.js';
import { applyOpts, baseSpec } from '../../../oci/runtime/spec/opts.js';

test('an image sub path is relative and stays inside the image', () => {
  assert.equal(imageSubPath('', 'img'), '');
  assert.equal(imageSubPath('etc', 'img'), 'etc');
  assert.equal(imageSubPath('etc/../usr/share/', 'img'), 'usr/share');
  assert.equal(imageSubPath('./', 'img'), '');
  for (const bad of ['../..', '..', 'a/../../b', '/etc', 'a\0b']) {
    assert.throws(() => imageSubPath(bad, 'img'), (e: Error) => e instanceof InvalidArgument && e.message.includes('img'), bad);
  }
});

test('an image volume is a read-only, nosuid, nodev bind mount (not noexec) replacing whatever else was at its place', () => {
  const spec = baseSpec('/rootfs');
  spec.mounts = [{ destination: '/data', source: '/x', options: ['bind'] }, { destination: '/other', source: '/y', options: ['bind'] }];
  applyOpts(spec, [withImageVolumes([{ destination: '/data/', source: '/views/img/merged/etc' }])]);
  assert.deepEqual(spec.mounts.filter((m) => m.destination.startsWith('/data')), [
    { destination: '/data/', type: 'bind', source: '/views/img/merged/etc', options: ['rbind', 'ro', 'nosuid', 'nodev', 'rprivate'] },
  ]);
  assert.ok(spec.mounts.some((m) => m.destination === '/other'));
});
