import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { silentLogger } from '../../../core/log.js';
import { NetworkChecks } from '../../../pod/network-checks.js';
import { runSandbox } from '../../../pod/sandbox-run.js';
import { stopSandbox } from '../../../pod/sandbox-stop.js';
import { fakePods, type FakePods } from '../../support/fake-pods.js';
import { sandboxConfig } from '../spec/fixtures.js';

describe('background CNI checks', () => {
  let f: FakePods;
  let checks: NetworkChecks;
  let calls = 0;
  let broken = false;
  beforeEach(() => {
    f = fakePods();
    calls = 0;
    broken = false;
    f.ctx.network.checkPod = async () => {
      calls++;
      if (broken) throw new Error('interface eth0 is gone');
    };
    checks = new NetworkChecks(f.ctx);
  });
  afterEach(async () => {
    await checks.stop();
    f.close();
  });

  it('reports the last result and its age, and never makes the caller wait for a plugin', async () => {
    const id = await runSandbox(f.ctx, sandboxConfig(), '', silentLogger);
    const sandbox = () => f.ctx.tables.sandboxes.get(id)!;
    assert.deepEqual(checks.report(sandbox()), { result: 'not checked yet' });
    await checks.check(id);
    assert.equal(calls, 1, 'a report with no result started one check');
    assert.deepEqual(checks.report(sandbox()), { result: 'ok', ageSeconds: 0 });
    assert.equal(calls, 1, 'a fresh result is reported without another check');
    broken = true;
    await checks.checkOldest();
    assert.deepEqual(checks.report(sandbox()), { result: 'interface eth0 is gone', ageSeconds: 0 });
  });

  it('runs one check at a time per sandbox, and none for a sandbox that is not attached', async () => {
    const id = await runSandbox(f.ctx, sandboxConfig(), '', silentLogger);
    await Promise.all([checks.check(id), checks.check(id), checks.checkOldest()]);
    assert.equal(calls, 1);
    await stopSandbox(f.ctx, id, silentLogger);
    assert.deepEqual(checks.report(f.ctx.tables.sandboxes.get(id)!), { result: 'not attached' });
    await checks.checkOldest();
    assert.equal(calls, 1);
  });

  it('the schedule checks the sandbox checked longest ago, one never checked first', async () => {
    const checked: string[] = [];
    f.ctx.network.checkPod = async (r) => { checked.push(r.sandboxId); };
    const a = await runSandbox(f.ctx, sandboxConfig({ metadata: { name: 'a', uid: 'ua', namespace: 'default', attempt: 0 } }), '', silentLogger);
    const b = await runSandbox(f.ctx, sandboxConfig({ metadata: { name: 'b', uid: 'ub', namespace: 'default', attempt: 0 } }), '', silentLogger);
    await checks.check(b);
    await checks.checkOldest();
    await checks.checkOldest();
    assert.deepEqual(checked, [b, a, b]);
  });
});
