// App containers get a private cgroup namespace on a cgroup v2 node, and share the node's on v1.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildContainerSpec } from '../../../oci/runtime/spec/container.js';
import { containerInput, hostFacts } from './fixtures.js';

test('a private cgroup namespace where the hierarchy is unified, none on cgroup v1', () => {
  const types = (cgroupNamespace: boolean | undefined) =>
    buildContainerSpec(containerInput({ host: hostFacts({ cgroupNamespace }) })).linux!.namespaces!.map((n) => n.type);
  assert.ok(types(true).includes('cgroup'));
  assert.deepEqual(buildContainerSpec(containerInput({ host: hostFacts({ cgroupNamespace: true }) })).linux!.namespaces!.find((n) => n.type === 'cgroup'), { type: 'cgroup' }, 'a new one, not a path');
  assert.ok(!types(false).includes('cgroup'));
  assert.ok(!types(undefined).includes('cgroup'));
});
