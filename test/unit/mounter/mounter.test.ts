import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeRequest, parseReply } from '../../../mounter/mounter.js';
import { mountPoints } from '../../../mounter/mountinfo.js';
import { Internal } from '../../../core/errors.js';

test('a mounter request is its id, op and args, each NUL-terminated', () => {
  assert.equal(encodeRequest(7, 'umount', ['/a b/c', '2']).toString('utf8'), '7\0umount\0/a b/c\x002\0');
  // Empty fields stay fields: the helper counts them.
  assert.equal(encodeRequest(8, 'mount', ['shm', '/x', 'tmpfs', '0', '', '']).toString('utf8'), '8\0mount\0shm\0/x\0tmpfs\x000\0\0\0');
  assert.equal(encodeRequest(9, 'netns', ['/d/ü', '/d/ü/p']).toString('utf8'), '9\0netns\0/d/ü\0/d/ü/p\0');
});

test('a mounter request refuses an argument with a NUL byte, which would shift every later field', () => {
  assert.throws(() => encodeRequest(1, 'umount', ['/a\0/b', '0']), (err: unknown) => err instanceof Internal && /NUL/.test(err.message));
});

test('mounter answers: success, errno with its text, and anything else refused', () => {
  assert.deepEqual(parseReply('12 0 '), { id: 12, errno: 0, message: '' });
  assert.deepEqual(parseReply('12 0'), { id: 12, errno: 0, message: '' });
  assert.deepEqual(parseReply('3 16 Device or resource busy'), { id: 3, errno: 16, message: 'Device or resource busy' });
  for (const bad of ['', 'x 0 ', '3', '3 -1 nope', ' 3 0 ']) assert.throws(() => parseReply(bad), Internal, bad);
});

test('mountPoints reads mountinfo with octal escapes', () => {
  const mi = [
    '22 1 8:1 / / rw - ext4 /dev/sda1 rw',
    '600 22 0:4 net:[4026532300] /var/run/netns/minicri-1 rw - nsfs nsfs rw',
    '601 22 0:4 net:[4026532301] /tmp/a\\040b/ns rw - nsfs nsfs rw',
  ].join('\n');
  assert.ok(mountPoints(mi).has('/var/run/netns/minicri-1'));
  assert.ok(mountPoints(mi).has('/tmp/a b/ns'));
  assert.ok(!mountPoints(mi).has('/var/run/netns'));
});
