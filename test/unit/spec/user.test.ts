import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgument } from '../../../core/errors.js';
import { parseGroup, parsePasswd, resolveUser } from '../../../oci/runtime/spec/user.js';

const passwd = [
  '# comment',
  'root:x:0:0:root:/root:/bin/sh',
  'app:x:1000:1001::/home/app:/bin/sh',
  'broken:x:notanumber:0::/:/bin/sh',
  'svc:x:2000:2000::/:/bin/false',
].join('\n');
const group = ['root:x:0:', 'wheel:x:10:app,root', 'appgrp:x:1001:', 'audio:x:29:app', 'svc:x:2000:', 'staff:x:50:svc'].join('\n');

describe('parsePasswd / parseGroup', () => {
  it('skips comments and malformed lines', () => {
    assert.deepEqual(parsePasswd(passwd).map((p) => p.name), ['root', 'app', 'svc']);
    assert.deepEqual(parseGroup(group).find((g) => g.name === 'wheel'), { name: 'wheel', gid: 10, members: ['app', 'root'] });
  });
});

describe('resolveUser', () => {
  it('defaults to root with root\'s groups', () => {
    assert.deepEqual(resolveUser({}, passwd, group), { uid: 0, gid: 0, additionalGids: [0, 10] });
  });
  it('resolves an image user name with its primary group and memberships', () => {
    assert.deepEqual(resolveUser({ imageUser: 'app' }, passwd, group), { uid: 1000, gid: 1001, additionalGids: [1001, 10, 29] });
  });
  it('resolves a numeric uid known to passwd', () => {
    assert.deepEqual(resolveUser({ imageUser: '2000' }, passwd, group), { uid: 2000, gid: 2000, additionalGids: [2000, 50] });
  });
  it('runs an unknown numeric uid with gid 0', () => {
    assert.deepEqual(resolveUser({ imageUser: '4321' }, passwd, group), { uid: 4321, gid: 0, additionalGids: [0] });
  });
  it('resolves uid:gid, name:group and mixed forms', () => {
    assert.deepEqual(resolveUser({ imageUser: '5:6' }, '', ''), { uid: 5, gid: 6, additionalGids: [6] });
    assert.deepEqual(resolveUser({ imageUser: 'app:audio' }, passwd, group), { uid: 1000, gid: 29, additionalGids: [29, 10] });
    assert.deepEqual(resolveUser({ imageUser: '1000:wheel' }, passwd, group), { uid: 1000, gid: 10, additionalGids: [10, 29] });
  });
  it('refuses unknown names and malformed strings', () => {
    assert.throws(() => resolveUser({ imageUser: 'ghost' }, passwd, group), /not in the image's \/etc\/passwd/);
    assert.throws(() => resolveUser({ imageUser: 'app:ghosts' }, passwd, group), /not in the image's \/etc\/group/);
    assert.throws(() => resolveUser({ imageUser: 'a:b:c' }, passwd, group), InvalidArgument);
    assert.throws(() => resolveUser({ imageUser: ':5' }, passwd, group), InvalidArgument);
    assert.throws(() => resolveUser({ imageUser: 'app' }), InvalidArgument); // no passwd in the image
  });
  it('run_as_user wins over the image user; run_as_group sets the gid', () => {
    assert.deepEqual(resolveUser({ runAsUser: 1000, imageUser: 'svc' }, passwd, group), { uid: 1000, gid: 1001, additionalGids: [1001, 10, 29] });
    assert.deepEqual(resolveUser({ runAsUser: 1000, runAsGroup: 7 }, passwd, group), { uid: 1000, gid: 7, additionalGids: [7, 10, 29] });
  });
  it('run_as_username is looked up', () => {
    assert.deepEqual(resolveUser({ runAsUsername: 'svc', runAsGroup: 3 }, passwd, group), { uid: 2000, gid: 3, additionalGids: [3, 50] });
    assert.throws(() => resolveUser({ runAsUsername: 'ghost' }, passwd, group), InvalidArgument);
  });
  it('refuses run_as_group without a user and out-of-range ids', () => {
    assert.throws(() => resolveUser({ runAsGroup: 5 }, passwd, group), /without run_as_user/);
    assert.throws(() => resolveUser({ runAsUser: -1 }, passwd, group), InvalidArgument);
    assert.throws(() => resolveUser({ runAsUser: 2 ** 32 }, passwd, group), InvalidArgument);
  });
  it('appends configured supplemental groups, deduplicated, and honours Strict', () => {
    assert.deepEqual(resolveUser({ imageUser: 'app', supplementalGroups: [29, 3000] }, passwd, group).additionalGids, [1001, 10, 29, 3000]);
    assert.deepEqual(resolveUser({ imageUser: 'app', supplementalGroups: [3000], strictSupplementalGroups: true }, passwd, group).additionalGids, [1001, 3000]);
  });
});
