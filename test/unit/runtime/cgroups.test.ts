import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { cgroupDir, cgroupEmpty, cgroupOwner, podCgroupParentDir, sliceNesting } from '../../../oci/runtime/cgroups.js';

const ID = 'a'.repeat(64);

describe('container cgroups on the host', () => {
  it('finds a cgroupfs path as it is, and a systemd scope inside its nested slices', () => {
    assert.equal(cgroupDir(`/kubepods/besteffort/pod1/${ID}`), `/kubepods/besteffort/pod1/${ID}`);
    assert.equal(cgroupDir(`kubepods-besteffort-pod1.slice:minicri:${ID}`),
      `/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/minicri-${ID}.scope`);
    assert.equal(cgroupDir(`system.slice:minicri:${ID}`), `/system.slice/minicri-${ID}.scope`);
    assert.deepEqual(sliceNesting('-.slice'), []);
  });

  it('tells the pod parent directory for each driver', () => {
    assert.equal(podCgroupParentDir('cgroupfs', '/kubepods/burstable/pod9'), '/kubepods/burstable/pod9');
    assert.equal(podCgroupParentDir('cgroupfs', ''), '/minicri');
    assert.equal(podCgroupParentDir('systemd', 'kubepods-pod9.slice'), '/kubepods.slice/kubepods-pod9.slice');
    assert.throws(() => podCgroupParentDir('cgroupfs', '/a/../b'), /without "\.\."/);
  });

  it('names the owner of a container cgroup, and of nothing else', () => {
    assert.equal(cgroupOwner(ID), ID);
    assert.equal(cgroupOwner(`minicri-${ID}.scope`), ID);
    assert.equal(cgroupOwner('kubepods.slice'), undefined);
    assert.equal(cgroupOwner('pod1234'), undefined);
    assert.equal(cgroupOwner(ID.toUpperCase()), undefined);
  });

  it('reads a cgroup as empty without processes and child cgroups, or when it is not there', async () => {
    const root = mkdtempSync(join(tmpdir(), 'minicri-cgroup-'));
    try {
      const dir = (name: string, procs: string) => {
        mkdirSync(join(root, name));
        writeFileSync(join(root, name, 'cgroup.procs'), procs);
        return join(root, name);
      };
      assert.equal(await cgroupEmpty(dir('empty', '')), true);
      assert.equal(await cgroupEmpty(dir('busy', '4242\n')), false);
      const parent = dir('parent', '');
      mkdirSync(join(parent, 'child'));
      assert.equal(await cgroupEmpty(parent), false);
      assert.equal(await cgroupEmpty(join(root, 'absent')), true);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
