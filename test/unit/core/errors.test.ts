// The cause-chain search the image code uses to tell a full disk (or any system error) under wrappers.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  callerPathError, causeWhere, FailedPrecondition, Internal, InvalidArgument, ResourceExhausted,
} from '../../../core/errors.js';

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

describe('callerPathError', () => {
  const sys = (code: string) => Object.assign(new Error(`${code}: failed, open '/out/x'`), { code, path: '/out/x' });
  it('turns what the node or the caller can fix into their errors, naming the path, and leaves the rest', () => {
    const full = callerPathError(new Error('wrapped', { cause: sys('ENOSPC') }), '/out');
    assert.ok(full instanceof ResourceExhausted && /\/out: its file system is full \(ENOSPC\)/.test(full.message));
    for (const code of ['EACCES', 'EROFS']) {
      const denied = callerPathError(sys(code), '/out');
      assert.ok(denied instanceof FailedPrecondition && denied.message.includes(`(${code})`));
    }
    assert.ok(callerPathError(sys('EEXIST'), '/out') instanceof InvalidArgument);
    const ours = new Internal('a bug');
    assert.equal(callerPathError(ours, '/out'), ours);
    const other = sys('EIO');
    assert.equal(callerPathError(other, '/out'), other);
  });
});
