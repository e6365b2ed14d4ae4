import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { imageVolumeKey } from '../../../pod/image-volumes.js';

describe('image volume views', () => {
  const id = `sha256:${'ab'.repeat(32)}`;

  it('shares one view per image, and one per image and mapping for user-namespaced pods', () => {
    assert.equal(imageVolumeKey(id), `imgvol-${'ab'.repeat(32)}`);
    const userns = (uid: number, gid = uid, size = 65536) => ({ uids: [{ containerId: 0, hostId: uid, size }], gids: [{ containerId: 0, hostId: gid, size }] });
    assert.equal(imageVolumeKey(id, userns(131072)), `imgvol-${'ab'.repeat(32)}-u131072x65536-g131072x65536`);
    assert.notEqual(imageVolumeKey(id, userns(131072)), imageVolumeKey(id, userns(196608)), 'pods of other mappings get views of their own');
    assert.notEqual(imageVolumeKey(id, userns(131072, 196608)), imageVolumeKey(id, userns(131072)));
    // The longest mapping still makes a valid rootfs key (at most 128 characters).
    assert.match(imageVolumeKey(id, userns(2 ** 32 - 2, 2 ** 32 - 2, 1)), /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/);
  });
});
