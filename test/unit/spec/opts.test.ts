import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { withNamespaces } from '../../../oci/runtime/spec/namespaces.js';
import { applyOpts, baseSpec, type SpecOpt } from '../../../oci/runtime/spec/opts.js';
import { withArgs, withCwd, withEnv } from '../../../oci/runtime/spec/process.js';
import { withUser } from '../../../oci/runtime/spec/user.js';

describe('baseSpec / applyOpts', () => {
  it('starts as root in / with every device denied', () => {
    const s = baseSpec('/rootfs');
    assert.deepEqual(s.root, { path: '/rootfs' });
    assert.deepEqual(s.process?.user, { uid: 0, gid: 0 });
    assert.equal(s.process?.cwd, '/');
    assert.deepEqual(s.linux?.resources?.devices, [{ allow: false, access: 'rwm' }]);
  });
  it('applies opts in order', () => {
    const order: number[] = [];
    const op = (n: number): SpecOpt => () => { order.push(n); };
    applyOpts(baseSpec('/r'), [op(1), op(2), op(3)]);
    assert.deepEqual(order, [1, 2, 3]);
  });
  it('simple setters copy their input', () => {
    const args = ['a'];
    const s = applyOpts(baseSpec('/r'), [
      withArgs(args), withEnv(['A=1']), withCwd('/w'), withUser({ uid: 1, gid: 2, additionalGids: [2] }),
      withNamespaces([{ type: 'pid' }]),
    ]);
    args.push('b');
    assert.deepEqual(s.process?.args, ['a']);
    assert.deepEqual(s.process?.env, ['A=1']);
    assert.equal(s.process?.cwd, '/w');
    assert.deepEqual(s.process?.user, { uid: 1, gid: 2, additionalGids: [2] });
    assert.deepEqual(s.linux?.namespaces, [{ type: 'pid' }]);
  });
});
