import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgument } from '../../../core/errors.js';
import { cgroupsPath, withCgroupsPath } from '../../../oci/runtime/spec/cgroups.js';
import { applyOpts, baseSpec } from '../../../oci/runtime/spec/opts.js';

describe('cgroupsPath', () => {
  it('cgroupfs: <parent>/<id>', () => {
    assert.equal(cgroupsPath('cgroupfs', '/kubepods/besteffort/pod123', 'abc'), '/kubepods/besteffort/pod123/abc');
    assert.equal(cgroupsPath('cgroupfs', '/kubepods/', 'abc'), '/kubepods/abc');
    assert.equal(cgroupsPath('cgroupfs', '', 'abc'), '/minicri/abc');
  });
  it('cgroupfs: parent must be absolute, without .., and not a slice', () => {
    assert.throws(() => cgroupsPath('cgroupfs', 'kubepods', 'abc'), InvalidArgument);
    assert.throws(() => cgroupsPath('cgroupfs', '/kubepods/../../etc', 'abc'), /without ".."/);
    assert.throws(() => cgroupsPath('cgroupfs', '/kubepods.slice', 'abc'), /cgroupfs driver/);
  });
  it('systemd: slice:prefix:id', () => {
    assert.equal(cgroupsPath('systemd', 'kubepods-besteffort-pod123.slice', 'abc'), 'kubepods-besteffort-pod123.slice:minicri:abc');
    assert.equal(
      cgroupsPath('systemd', '/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice', 'abc'),
      'kubepods-burstable-pod1.slice:minicri:abc',
    );
    assert.equal(cgroupsPath('systemd', '', 'abc'), 'system.slice:minicri:abc');
  });
  it('systemd: parent must be a slice', () => {
    assert.throws(() => cgroupsPath('systemd', '/kubepods/besteffort', 'abc'), /systemd slice/);
    assert.throws(() => cgroupsPath('systemd', 'a b.slice', 'abc'), InvalidArgument);
  });
  it('refuses ids that cannot name a cgroup', () => {
    assert.throws(() => cgroupsPath('cgroupfs', '/k', '../x'), InvalidArgument);
    assert.throws(() => cgroupsPath('systemd', 'k.slice', 'a:b'), InvalidArgument);
  });
  it('withCgroupsPath sets linux.cgroupsPath', () => {
    assert.equal(applyOpts(baseSpec('/r'), [withCgroupsPath('cgroupfs', '/k', 'id')]).linux?.cgroupsPath, '/k/id');
  });
});
