import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Leases, type PullIntent } from '../../../oci/image/lease.js';

/** An intent table that keeps what it is given, as the state store's does. */
function table() {
  const rows = new Map<string, PullIntent>();
  return {
    rows,
    list: () => [...rows.values()],
    put: (p: PullIntent) => { rows.set(p.id, p); },
    delete: (id: string) => { rows.delete(id); },
  };
}

test('a pull lease writes its intent first, a copy per hold, and deletes it on release', () => {
  const intents = table();
  const leases = new Leases(intents);
  const lease = leases.open('registry.example/app:1');
  const [first] = intents.list();
  assert.deepEqual(first?.leased, []);
  lease.hold('sha256:a');
  lease.hold('sha256:b');
  assert.deepEqual(first.leased, [], 'what the table was given before is not changed afterwards');
  assert.deepEqual(intents.list()[0]?.leased, ['sha256:a', 'sha256:b']);
  assert.equal(intents.list()[0]?.reference, 'registry.example/app:1');
  lease.release();
  assert.equal(intents.rows.size, 0);
});

test('held keys are counted across leases; an import writes no intent', () => {
  const intents = table();
  const leases = new Leases(intents);
  const a = leases.open('registry.example/app:1');
  const b = leases.open();
  a.hold('sha256:shared');
  b.hold('sha256:shared');
  b.hold('sha256:own');
  assert.equal(intents.rows.size, 1);
  a.release();
  assert.deepEqual([...leases.held()].sort(), ['sha256:own', 'sha256:shared']);
  b.release();
  assert.deepEqual([...leases.held()], []);
});
