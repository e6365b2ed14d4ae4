import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { handlerFeatures, parseRuncFeatures, type KernelFeatures } from '../../../oci/runtime/features.js';
import { runtimeHandlers } from '../../../pod/runtime-status.js';

const RUNC_115 = JSON.stringify({
  ociVersionMin: '1.0.0', mountOptions: ['bind', 'rbind', 'ro', 'rro', 'rrw'],
  linux: { namespaces: ['cgroup', 'ipc', 'mount', 'network', 'pid', 'user', 'uts'] },
});
const KERNEL_OK: KernelFeatures = {
  mountSetattr: true, userNamespaces: true, idmapMounts: true, overlayIdmappedLayers: true, stagingReachable: true,
};

describe('runtime handler features', () => {
  it('reads the mount options and namespaces of `runc features`, and nothing from an unreadable answer', () => {
    assert.deepEqual(parseRuncFeatures(RUNC_115).namespaces, ['cgroup', 'ipc', 'mount', 'network', 'pid', 'user', 'uts']);
    assert.ok(parseRuncFeatures(RUNC_115).mountOptions.includes('rro'));
    assert.deepEqual(parseRuncFeatures('runc: unknown command "features"'), { mountOptions: [], namespaces: [] });
    assert.deepEqual(parseRuncFeatures('{"mountOptions": "rro"}'), { mountOptions: [], namespaces: [] });
  });

  it('turns on what both the runtime and the kernel support', () => {
    const f = handlerFeatures(parseRuncFeatures(RUNC_115), KERNEL_OK);
    assert.deepEqual(f, { recursiveReadOnly: true, userNamespaces: true, missing: [] });
  });

  it('turns a feature off, saying why, when either side lacks it', () => {
    const noRro = handlerFeatures({ mountOptions: ['ro'], namespaces: ['user'] }, KERNEL_OK);
    assert.equal(noRro.recursiveReadOnly, false);
    assert.equal(noRro.userNamespaces, true);
    assert.match(noRro.missing.join(), /"rro"/);

    const oldKernel = handlerFeatures(parseRuncFeatures(RUNC_115), { ...KERNEL_OK, mountSetattr: false, idmapMounts: false });
    assert.deepEqual([oldKernel.recursiveReadOnly, oldKernel.userNamespaces], [false, false]);
    assert.match(oldKernel.missing.join(), /mount_setattr/);

    const noUserns = handlerFeatures(parseRuncFeatures(RUNC_115), { ...KERNEL_OK, userNamespaces: false });
    assert.deepEqual([noUserns.recursiveReadOnly, noUserns.userNamespaces], [true, false]);
    for (const off of ['idmapMounts', 'overlayIdmappedLayers', 'stagingReachable'] as const) {
      const f = handlerFeatures(parseRuncFeatures(RUNC_115), { ...KERNEL_OK, [off]: false });
      assert.equal(f.userNamespaces, false, off);
      assert.equal(f.missing.length, 1, off);
    }
    const silent = handlerFeatures(undefined, KERNEL_OK);
    assert.deepEqual([silent.recursiveReadOnly, silent.userNamespaces], [false, false]);
    assert.match(silent.missing.join(), /does not answer/);
  });

  it('Status lists the default handler under the empty name and its own, then every other configured one', () => {
    const features = new Map([
      ['runc', { recursiveReadOnly: true, userNamespaces: true, missing: [] }],
      ['crun', { recursiveReadOnly: false, userNamespaces: false, missing: ['x'] }],
    ]);
    const list = runtimeHandlers('runc', ['runc', 'kata', 'crun'], features);
    assert.deepEqual(list.map((h) => [h.name, h.recursiveReadOnly, h.userNamespaces]), [
      ['', true, true], ['runc', true, true], ['crun', false, false], ['kata', false, false],
    ]);
    assert.deepEqual(list[3]!.missing, ['not probed']);
  });
});
