// ContainerStatus as the CRI answers it: the image by its name now (first tag; repo digest for a digest pull;
// the created-with name once the image is gone) and the stop signal by the Signal enum's number.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ImageRecord } from '../../../oci/image/types.js';
import type { ContainerRecord } from '../../../pod/records.js';
import { containerStatus, statusImageName } from '../../../server/cri-views.js';
import { loadCri } from '../../../server/proto.js';

const ID = `sha256:${'a'.repeat(64)}`;
const DIGEST = `sha256:${'b'.repeat(64)}`;

function container(userSpecified = '', stopSignal = 'SIGTERM'): ContainerRecord {
  return {
    id: 'c1', sandboxId: 'p1', state: 'CONTAINER_RUNNING', createdAt: '1', startedAt: '2', finishedAt: '0', exitCode: 0, reason: '', message: '',
    config: { metadata: { name: 'app', attempt: 0 }, image: { image: ID, user_specified_image: userSpecified }, labels: {}, annotations: {}, mounts: [] } as unknown as ContainerRecord['config'],
    image: { id: ID, name: ID, ref: `example.test/app@${DIGEST}` }, dir: '/nowhere', logPath: '', stopSignal,
  };
}

function image(repoTags: string[], repoDigests: string[]): ImageRecord {
  return { id: ID, repoTags, repoDigests, size: 1, layers: [], blobs: [], pinned: false, createdAt: 0, config: {} as ImageRecord['config'] };
}

describe('the image a container status names', () => {
  it('is the first repo tag of the image, not the id kubelet created the container with', () => {
    assert.equal(statusImageName(container('example.test/app:1'), image(['example.test/app:1', 'other.test/app:latest'], [`example.test/app@${DIGEST}`])), 'example.test/app:1');
  });

  it('is the digest reference the pod named for an image pulled by digest only, else its first repo digest', () => {
    const byDigest = image([], [`other.test/app@${DIGEST}`, `docker.io/library/busybox@${DIGEST}`]);
    assert.equal(statusImageName(container(`busybox@${DIGEST}`), byDigest), `docker.io/library/busybox@${DIGEST}`, 'as kept: normalised');
    assert.equal(statusImageName(container(''), byDigest), `other.test/app@${DIGEST}`, 'no user-specified image: the first');
    assert.equal(statusImageName(container('not a reference!'), byDigest), `other.test/app@${DIGEST}`);
  });

  it('is the name the container was created with once the image is gone, or when it has no name at all', () => {
    assert.equal(statusImageName(container('example.test/app:1'), undefined), ID);
    assert.equal(statusImageName(container(), image([], [])), ID);
  });

  it('goes into ContainerStatus with image_ref and image_id as before, and the stop signal encodes by number', () => {
    const status = containerStatus(container('example.test/app:1', 'SIGUSR1'), { status: (id) => (id === ID ? image(['example.test/app:1'], []) : undefined) });
    assert.equal(status.image?.image, 'example.test/app:1');
    assert.equal(status.image?.user_specified_image, 'example.test/app:1');
    assert.equal(status.image_ref, `example.test/app@${DIGEST}`);
    assert.equal(status.image_id, ID);
    // The number goes on the wire; the client's decoder names it in its own proto's words.
    const method = loadCri().RuntimeService.service.ContainerStatus;
    const back = method.responseDeserialize(method.responseSerialize({ status, info: {} }));
    assert.equal(back.status?.stop_signal, 'SIGUSR1');
  });
});
