// Which Localhost seccomp profile file a security context needs read: the new field or the legacy path.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidArgument } from '../../../core/errors.js';
import { localhostSeccompRef } from '../../../oci/runtime/spec/index.js';

const sc = (fields: { seccomp?: { profile_type: string; localhost_ref: string } | null; seccomp_profile_path?: string; privileged?: boolean }) => ({
  privileged: false, run_as_user: null, run_as_group: null, supplemental_groups: [], supplemental_groups_policy: 'Merge',
  seccomp: null, seccomp_profile_path: '', apparmor: null, ...fields,
}) as Parameters<typeof localhostSeccompRef>[0];

test('the profile file comes from localhost_ref or from localhost/<path>', () => {
  assert.equal(localhostSeccompRef(sc({ seccomp: { profile_type: 'Localhost', localhost_ref: '/p/a.json' } })), '/p/a.json');
  assert.equal(localhostSeccompRef(sc({ seccomp_profile_path: 'localhost//p/b.json' })), '/p/b.json');
  // The new field wins over the legacy one.
  assert.equal(localhostSeccompRef(sc({ seccomp: { profile_type: 'RuntimeDefault', localhost_ref: '' }, seccomp_profile_path: 'localhost//p/b.json' })), undefined);
  assert.equal(localhostSeccompRef(sc({ seccomp_profile_path: 'runtime/default' })), undefined);
  assert.equal(localhostSeccompRef(sc({})), undefined);
  assert.equal(localhostSeccompRef(null), undefined);
  assert.equal(localhostSeccompRef(sc({ seccomp_profile_path: 'localhost//p/b.json', privileged: true })), undefined, 'privileged: no filter, nothing to read');
  assert.throws(() => localhostSeccompRef(sc({ seccomp_profile_path: 'localhost/rel.json' })), (e: Error) => e instanceof InvalidArgument && /"rel.json" is not an absolute path/.test(e.message));
  assert.throws(() => localhostSeccompRef(sc({ seccomp_profile_path: 'bogus' })), InvalidArgument);
});
