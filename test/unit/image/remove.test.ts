// RemoveImage's rule over the image records alone (no registry): any one name of an image (tag, digest
// reference, id or id prefix) removes it with all its names; a missing image is success; an image in use is
// refused with its user named.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FailedPrecondition } from '../../../core/errors.js';
import type { ImageRecord } from '../../../oci/image/types.js';
import { imageEnv } from '../../support/image-env.js';

const id = (c: string) => `sha256:${c.repeat(64)}`;

function record(c: string, repoTags: string[], repoDigests: string[]): ImageRecord {
  return { id: id(c), repoTags, repoDigests, size: 1, layers: [], blobs: [], pinned: false, createdAt: 0, config: {} as ImageRecord['config'] };
}

test('one tag, a digest reference, an id or a prefix removes the image under all its names; others stay', async (t) => {
  let used = '';
  const { images, repo } = await imageEnv(t, undefined, { usedBy: (i) => (i === used ? 'container "app" (c1) of pod ns/web: remove the container first' : undefined) });
  const fill = () => {
    repo.put(record('a', ['example.test/app:1', 'example.test/app:latest', 'other.test/mirror/app:v1'], [`example.test/app@${id('d')}`]));
    repo.put(record('b', ['example.test/base:1'], []));
  };
  for (const name of ['example.test/app:latest', 'other.test/mirror/app:v1', `example.test/app@${id('d')}`, id('a'), 'aaaaaaaaaaaa']) {
    fill();
    await images.remove(name);
    assert.equal(images.status(id('a')), undefined, name);
    for (const other of ['example.test/app:1', 'example.test/app:latest', 'other.test/mirror/app:v1', `example.test/app@${id('d')}`]) {
      assert.equal(images.status(other), undefined, `${other} after removing ${name}`);
    }
    assert.deepEqual(images.list().map((r) => r.id), [id('b')], 'another image is left alone');
  }
  await images.remove('example.test/app:latest'); // idempotent
  await images.remove(id('a'));

  used = id('b');
  await assert.rejects(images.remove('example.test/base:1'),
    (err: Error) => err instanceof FailedPrecondition && err.message === `image ${id('b')} (example.test/base:1) is used by container "app" (c1) of pod ns/web: remove the container first`);
  assert.deepEqual(images.status('example.test/base:1')?.repoTags, ['example.test/base:1'], 'a refused removal removes no tag');
});
