// The registry token cache is bounded: so many entries (the least recently used go first), a lifetime capped
// whatever the token server says, and tokens too big to keep are not kept.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_CACHED_TOKEN_CHARS, TokenCache } from '../../../oci/image/token-cache.js';

function clock(): { now: () => number; advance: (ms: number) => void } {
  let t = 1_000_000;
  return { now: () => t, advance: (ms) => { t += ms; } };
}

test('at most maxEntries tokens are kept, the least recently used dropped first', () => {
  const c = new TokenCache(1000, 3600, clock().now);
  for (let i = 0; i < 1500; i++) {
    c.set(`key ${i}`, `Bearer t${i}`, 300);
    if (i >= 1) assert.equal(c.get('key 0'), 'Bearer t0', 'key 0 is used all along');
  }
  assert.equal(c.size, 1000);
  assert.equal(c.get('key 0'), 'Bearer t0', 'used lately, so kept');
  assert.equal(c.get('key 1'), undefined, 'the oldest unused went');
  assert.equal(c.get('key 1499'), 'Bearer t1499');
});

test('a token lives at most the lifetime cap, whatever expires_in said', () => {
  const t = clock();
  const c = new TokenCache(1000, 3600, t.now);
  c.set('k', 'Bearer forever', 1e12);
  t.advance(3599_000);
  assert.equal(c.get('k'), 'Bearer forever');
  t.advance(2000);
  assert.equal(c.get('k'), undefined, 'an hour is the most');
  assert.equal(c.size, 0, 'and an expired token asked for is dropped');
});

test('a token longer than the cache takes is not kept, and a shorter one under its key goes too', () => {
  const c = new TokenCache(1000, 3600, clock().now);
  c.set('k', 'Bearer small', 300);
  c.set('k', `Bearer ${'x'.repeat(MAX_CACHED_TOKEN_CHARS)}`, 300);
  assert.equal(c.get('k'), undefined);
  assert.equal(c.size, 0);
});
