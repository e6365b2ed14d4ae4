// The cause-chain search the image code uses to tell a full disk (or any system error) under wrappers.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { causeWhere, Internal } from '../../../core/errors.js';

describe('causeWhere', () => {
  it('finds the first matching error from the error itself down its causes, and none when none matches', () => {
    const full = Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', path: '/x' });
    const wrapped = new Internal('cannot unpack', { cause: new Error('layer failed', { cause: full }) });
    assert.equal(causeWhere(wrapped, (e) => e.code === 'ENOSPC'), full);
    assert.equal(causeWhere(full, (e) => e.code === 'ENOSPC'), full);
    assert.equal(causeWhere(wrapped, (e) => e.code === 'EACCES'), undefined);
    assert.equal(causeWhere(undefined, () => true), undefined);
  });
});
