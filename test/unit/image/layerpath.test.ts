import assert from 'node:assert/strict';
import { test } from 'node:test';
import { classifyEntry, confine, symlinkTarget, xattrAllowed } from '../../../oci/image/layerpath.js';
import { InvalidArgument } from '../../../core/errors.js';

test('entry paths are confined to the layer root', () => {
  assert.deepEqual(confine('a/b/c'), ['a', 'b', 'c']);
  assert.deepEqual(confine('./a//b/./c/'), ['a', 'b', 'c']);
  assert.deepEqual(confine('/etc/passwd'), ['etc', 'passwd']);
  assert.deepEqual(confine('../../../etc/passwd'), ['etc', 'passwd']);
  assert.deepEqual(confine('a/../../b'), ['b']);
  assert.deepEqual(confine('.'), []);
  assert.deepEqual(confine('..'), []);
});

test('symlink targets resolve inside the root', () => {
  assert.deepEqual(symlinkTarget(['usr', 'bin'], '../lib'), ['usr', 'lib']);
  assert.deepEqual(symlinkTarget(['a'], '/etc'), ['etc']);
  assert.deepEqual(symlinkTarget(['a'], '../../../../tmp'), ['tmp']);
  assert.deepEqual(symlinkTarget([], '/'), []);
});

test('whiteouts and opaque markers', () => {
  assert.deepEqual(classifyEntry('a/b/.wh.c'), { kind: 'whiteout', dir: ['a', 'b'], name: 'c' });
  assert.deepEqual(classifyEntry('.wh.top'), { kind: 'whiteout', dir: [], name: 'top' });
  assert.deepEqual(classifyEntry('./a/.wh..wh..opq'), { kind: 'opaque', dir: ['a'] });
  assert.deepEqual(classifyEntry('a/.wh..wh.plnk'), { kind: 'ignore' });
  assert.deepEqual(classifyEntry('a/b.wh.c'), { kind: 'normal', path: ['a', 'b.wh.c'] });
  assert.deepEqual(classifyEntry('../../.wh.x'), { kind: 'whiteout', dir: [], name: 'x' });
  assert.deepEqual(classifyEntry('/'), { kind: 'normal', path: [] });
  assert.throws(() => classifyEntry('a/.wh.'), InvalidArgument);
});

test('only user.* and security.* xattrs are applied', () => {
  assert.ok(xattrAllowed('user.foo'));
  assert.ok(xattrAllowed('security.capability'));
  assert.ok(!xattrAllowed('trusted.overlay.opaque'));
  assert.ok(!xattrAllowed('system.posix_acl_access'));
});
