// ExecSync, cgroup stats and OOM kills on real containers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { readStatsForPid, readCgroupStats, cgroupDirsForPath, nanoCores } from '../../../oci/runtime/stats.js';
import { FailedPrecondition, NotFound } from '../../../core/errors.js';
import { setup, uniqueId, waitFor, CGROUP_PARENT } from './helpers.js';

test('execSync returns stdout, stderr and the exit code; refuses stopped containers', async (t) => {
  const env = await setup(t);
  const id = uniqueId('exec');
  await env.rt.create({ id, bundle: await env.bundle(id, ['/bin/sleep', '100']), logPath: env.logPath(id) });
  await assert.rejects(env.rt.execSync(id, ['/bin/true'], { timeoutSec: 5 }), FailedPrecondition);
  await env.rt.start(id);

  const r = await env.rt.execSync(id, ['/bin/sh', '-c', 'echo out; echo err >&2; exit 3'], { timeoutSec: 10 });
  assert.equal(r.stdout.toString(), 'out\n');
  assert.equal(r.stderr.toString(), 'err\n');
  assert.equal(r.exitCode, 3);
  assert.equal(r.timedOut, false);

  const ok = await env.rt.execSync(id, ['/bin/cat', '/proc/1/cmdline'], { timeoutSec: 0 });
  assert.equal(ok.exitCode, 0);
  assert.match(ok.stdout.toString(), /sleep/);

  const missing = await env.rt.execSync(id, ['/no/such/cmd'], { timeoutSec: 10 });
  assert.notEqual(missing.exitCode, 0);
  assert.match(missing.stderr.toString(), /no such file/i);

  // No exec pid files are left behind.
  assert.deepEqual((await readdir(join(env.stateDir, 'containers', id))).filter((f) => f.startsWith('exec-')), []);
  await env.rt.delete(id, { force: true });
  await assert.rejects(env.rt.execSync(id, ['/bin/true'], { timeoutSec: 5 }), NotFound);
});

test('execSync kills the command at the timeout and reports it', async (t) => {
  const env = await setup(t);
  const id = uniqueId('exectmo');
  await env.rt.create({ id, bundle: await env.bundle(id, ['/bin/sleep', '100']), logPath: env.logPath(id) });
  await env.rt.start(id);
  const r = await env.rt.execSync(id, ['/bin/sh', '-c', 'echo started; exec sleep 60'], { timeoutSec: 1 });
  // The timeout ended it, after it had started (its output is kept); that it was killed is checked below.
  assert.equal(r.timedOut, true);
  assert.equal(r.stdout.toString(), 'started\n');
  // The exec'd process is gone: only the container's own sleep remains.
  const ps = await env.rt.execSync(id, ['/bin/sh', '-c', 'for p in /proc/[0-9]*; do tr "\\0" " " < $p/cmdline; echo; done'], { timeoutSec: 10 });
  assert.match(ps.stdout.toString(), /sleep 100/);
  assert.doesNotMatch(ps.stdout.toString(), /sleep 60/);
  await env.rt.delete(id, { force: true });
});

test('execSync caps huge output without hanging', async (t) => {
  const env = await setup(t);
  const id = uniqueId('execbig');
  await env.rt.create({ id, bundle: await env.bundle(id, ['/bin/sleep', '100']), logPath: env.logPath(id) });
  await env.rt.start(id);
  const cap = 1024 * 1024;
  const r = await env.rt.execSync(id, ['/bin/sh', '-c', 'head -c 20000000 /dev/zero; head -c 3000000 /dev/zero >&2; exit 4'], { timeoutSec: 30, maxOutputBytes: cap });
  assert.equal(r.stdout.length, cap);
  assert.equal(r.stderr.length, cap);
  assert.equal(r.stdoutTruncated, true);
  assert.equal(r.stderrTruncated, true);
  assert.equal(r.exitCode, 4);
  assert.equal(r.timedOut, false);
  await env.rt.delete(id, { force: true });
});

test('stats of a busy container show CPU and memory use', async (t) => {
  const env = await setup(t);
  const id = uniqueId('stats');
  const { pid } = await env.rt.create({ id, bundle: await env.bundle(id, ['/bin/sh', '-c', 'while :; do :; done']), logPath: env.logPath(id) });
  await env.rt.start(id);
  const first = await readStatsForPid(pid);
  await new Promise((r) => setTimeout(r, 500));
  const second = await readCgroupStats(await cgroupDirsForPath(`${CGROUP_PARENT}/${id}`));
  assert.ok(second.cpuUsageNs > first.cpuUsageNs, `cpu ${first.cpuUsageNs} -> ${second.cpuUsageNs}`);
  assert.ok(second.memoryUsageBytes > 0);
  assert.ok(second.workingSetBytes > 0 && second.workingSetBytes <= second.memoryUsageBytes);
  assert.equal(second.availableBytes, undefined); // no limit set
  const cores = nanoCores(first, second);
  assert.ok(cores > 0.3e9 && cores < 1.5e9, `a busy loop uses about one core, got ${cores}`);
  await env.rt.delete(id, { force: true });
  await assert.rejects(readStatsForPid(pid), NotFound);
});

test('a memory-limited container allocating too much is OOMKilled', async (t) => {
  const env = await setup(t);
  const id = uniqueId('oom');
  const limit = 32 * 1024 * 1024;
  // tail keeps the current "line" in memory, and /dev/zero never ends one.
  const bundle = await env.bundle(id, ['/bin/sh', '-c', 'tail /dev/zero'], { resources: { memory: { limit, swap: limit } } });
  await env.rt.create({ id, bundle, logPath: env.logPath(id) });
  await env.rt.start(id);
  const exit = await waitFor('OOM kill', () => env.rt.exitStatus(id), 30_000);
  assert.equal(exit.exitCode, 137);
  assert.equal(exit.oomKilled, true);
  // conmon's stray "oom" marker must not land in the daemon's working directory.
  assert.equal(await stat(join(process.cwd(), 'oom')).then(() => true, () => false), false);
  await env.rt.delete(id);
});
