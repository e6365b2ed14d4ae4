import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgument } from '../../../core/errors.js';
import { ensureShared, ensureSharedOrSlave, mountOf, parseMountInfo } from '../../../oci/runtime/spec/mountinfo.js';
import { MOUNTINFO } from './fixtures.js';

describe('parseMountInfo', () => {
  it('reads mount point, optional fields, type and source', () => {
    const m = parseMountInfo(MOUNTINFO);
    assert.equal(m.length, 4);
    assert.deepEqual(m[0], { mountPoint: '/', optional: ['shared:1'], fsType: 'ext4', source: '/dev/sda1' });
    assert.deepEqual(m[2]?.optional, []);
  });
  it('unescapes octal sequences and skips junk', () => {
    const m = parseMountInfo('50 22 0:50 / /mnt/with\\040space rw - tmpfs tmpfs rw\ngarbage\n');
    assert.equal(m.length, 1);
    assert.equal(m[0]?.mountPoint, '/mnt/with space');
  });
});

describe('propagation checks', () => {
  const mounts = parseMountInfo(MOUNTINFO);
  it('finds the deepest mount containing a path', () => {
    assert.equal(mountOf('/mnt/private/data', mounts)?.mountPoint, '/mnt/private');
    assert.equal(mountOf('/mnt/privateer', mounts)?.mountPoint, '/');
  });
  it('the last of stacked mounts wins', () => {
    const stacked = parseMountInfo(`${MOUNTINFO}\n60 40 0:60 / /mnt/private rw shared:9 - tmpfs tmpfs rw`);
    assert.deepEqual(mountOf('/mnt/private/x', stacked)?.optional, ['shared:9']);
  });
  it('Bidirectional needs shared', () => {
    ensureShared('/var/lib/data', mounts);
    assert.throws(() => ensureShared('/mnt/private/x', mounts), InvalidArgument);
    assert.throws(() => ensureShared('/mnt/slave/x', mounts), /shared mount/);
  });
  it('HostToContainer needs shared or slave', () => {
    ensureSharedOrSlave('/var/lib/data', mounts);
    ensureSharedOrSlave('/mnt/slave/x', mounts);
    assert.throws(() => ensureSharedOrSlave('/mnt/private/x', mounts), /shared or slave/);
  });
});
