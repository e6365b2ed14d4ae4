import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compareVersions, parseVersion, versionAtLeast } from '../../../core/version.js';

test('parseVersion reads the leading dotted numbers, after an optional v', () => {
  assert.deepEqual(parseVersion('6.18.44-fc-v657'), [6, 18, 44]);
  assert.deepEqual(parseVersion('v0.6.0'), [0, 6, 0]);
  assert.equal(parseVersion('garbage'), undefined);
});

test('compareVersions orders numerically, a missing part counting as 0, the unparsable lowest', () => {
  assert.ok(compareVersions('0.10.0', '0.4.0') > 0);
  assert.equal(compareVersions('5.19', '5.19.0'), 0);
  assert.ok(compareVersions('junk', '0.0.1') < 0);
  assert.equal(compareVersions('junk', 'other junk'), 0);
  assert.deepEqual(['1.0.0', 'x', '0.3.1', '0.10.0'].sort(compareVersions), ['x', '0.3.1', '0.10.0', '1.0.0']);
});

test('versionAtLeast: spec versions and kernel releases', () => {
  assert.ok(versionAtLeast('1.1.0', '1.1.0'));
  assert.ok(!versionAtLeast('0.3.1', '0.4.0'));
  assert.ok(versionAtLeast('6.18.44-fc-v657', '5.19'));
  assert.ok(versionAtLeast('5.19.0', '5.19'));
  assert.ok(!versionAtLeast('5.15.0-91-generic', '5.19'));
  assert.ok(versionAtLeast('4.8.0', '4.8'));
  assert.ok(!versionAtLeast('4.7.10', '4.8'));
  assert.ok(!versionAtLeast('garbage', '0'));
});
