import assert from 'node:assert/strict';
import { test } from 'node:test';
import { lowerOrder } from '../../../oci/image/snapshot.js';

test('lowerdirs are top first with repeated layers kept at their topmost place', () => {
  assert.deepEqual(lowerOrder(['a', 'b', 'c']), ['c', 'b', 'a']);
  assert.deepEqual(lowerOrder(['e', 'a', 'e', 'b', 'e']), ['e', 'b', 'a']);
  assert.deepEqual(lowerOrder(['a', 'e', 'b', 'e', 'c']), ['c', 'e', 'b', 'a']);
  assert.deepEqual(lowerOrder([]), []);
});
