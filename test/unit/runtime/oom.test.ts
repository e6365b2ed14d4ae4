import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, writeFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hasCapability, parseCapBnd, computeOomScoreLimits, clampOomScoreAdj, readOomScoreLimits } from '../../../oci/runtime/oom.js';
import { Internal } from '../../../core/errors.js';

test('reads capability bits from CapBnd masks', () => {
  assert.equal(hasCapability('000001ffffffffff', 24), true);
  assert.equal(hasCapability('000001fffeffffff', 24), false); // this VM: everything but CAP_SYS_RESOURCE
  assert.equal(hasCapability('000001fffeffffff', 40), true);
  assert.throws(() => hasCapability('zz', 1), Internal);
  assert.equal(parseCapBnd('Name:\tnode\nCapEff:\t0\nCapBnd:\t000001fffeffffff\nCapAmb:\t0\n'), '000001fffeffffff');
  assert.throws(() => parseCapBnd('Name:\tnode\n'), Internal);
});

test('without CAP_SYS_RESOURCE the floor is our own score; with it, -1000', () => {
  const without = computeOomScoreLimits(-500, '000001fffeffffff');
  assert.deepEqual(without, { own: -500, hasSysResource: false, minAllowed: -500 });
  assert.deepEqual(clampOomScoreAdj(-998, without), { value: -500, clamped: true });
  assert.deepEqual(clampOomScoreAdj(1000, without), { value: 1000, clamped: false });
  const withCap = computeOomScoreLimits(0, '000001ffffffffff');
  assert.equal(withCap.minAllowed, -1000);
  assert.deepEqual(clampOomScoreAdj(-998, withCap), { value: -998, clamped: false });
});

test('readOomScoreLimits reads a proc directory (fixture and the real one)', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'minicri-rt-unit-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'oom_score_adj'), '-100\n');
  await writeFile(join(dir, 'status'), 'CapBnd:\t000001fffeffffff\n');
  assert.deepEqual(await readOomScoreLimits(dir), { own: -100, hasSysResource: false, minAllowed: -100 });
  const real = await readOomScoreLimits();
  assert.ok(real.minAllowed >= -1000 && real.minAllowed <= 1000);
});
