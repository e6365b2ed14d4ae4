// runc under conmon, for real: create/start/state, CRI log lines, exit codes, stop, delete, failures.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, readFile, readdir, rename, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseCriLog, joinCriLogEntries } from '../../../oci/runtime/logs.js';
import { FailedPrecondition, Internal, InvalidArgument, AlreadyExists } from '../../../core/errors.js';
import { OciRuntime } from '../../../oci/runtime/runc.js';
import { silentLogger } from '../../../core/log.js';
import { setup, uniqueId, runcIds, conmonsMentioning, cgroupExists, waitFor, RUNC, CONMON } from './helpers.js';

test('create leaves the container CREATED, start runs it, output lands in CRI log lines', async (t) => {
  const env = await setup(t);
  const id = uniqueId('life');
  const long = 'x'.repeat(20000);
  const bundle = await env.bundle(id, ['/bin/sh', '-c', `echo hello; echo oops >&2; printf '%s\\n' ${long}; sleep 0.3`]);
  const logPath = env.logPath(id);

  const { pid } = await env.rt.create({ id, bundle, logPath });
  assert.ok(pid > 0);
  assert.deepEqual(await env.rt.state(id).then((s) => s && [s.status, s.pid]), ['created', pid]);
  assert.equal(await env.rt.exitStatus(id), undefined);

  await env.rt.start(id);
  assert.equal((await env.rt.state(id))?.status, 'running');
  const exit = await waitFor('exit file', () => env.rt.exitStatus(id));
  assert.equal(exit.exitCode, 0);
  assert.equal(exit.oomKilled, false);
  // The finish time is when conmon wrote the exit file.
  assert.equal(exit.finishedAt.getTime(), (await stat(join(env.stateDir, 'exits', id))).mtime.getTime());

  const entries = parseCriLog(await readFile(logPath, 'utf8'));
  const lines = joinCriLogEntries(entries);
  assert.deepEqual(lines.filter((l) => l.stream === 'stdout').map((l) => l.content), ['hello', long]);
  assert.deepEqual(lines.filter((l) => l.stream === 'stderr').map((l) => l.content), ['oops']);
  assert.ok(lines.every((l) => l.complete));
  // The long line cannot fit one entry: conmon splits it into P entries ended by an F.
  const longParts = entries.filter((e) => e.stream === 'stdout' && e.content.startsWith('x'));
  assert.ok(longParts.length >= 2, `expected the 20000-byte line split, got ${longParts.length} entries`);
  assert.ok(longParts.slice(0, -1).every((e) => e.partial) && !longParts.at(-1)!.partial);

  await env.rt.delete(id);
  assert.equal(await env.rt.state(id), undefined);
  assert.equal(await env.rt.exitStatus(id), undefined);
  assert.deepEqual(await runcIds(env.root), []);
  assert.deepEqual(await conmonsMentioning(env.stateDir), []);
  assert.equal(await cgroupExists(id), false);
  assert.deepEqual(await readdir(join(env.stateDir, 'containers')), []);
  assert.deepEqual(await readdir(join(env.stateDir, 'sockets')), []);
});

test('a stopped container is deleted without a runc process, unless a poststop hook needs runc', async (t) => {
  const env = await setup(t);
  // The same runc behind a script that notes each command it is given.
  const calls = join(env.dir, 'runc-calls');
  const wrapper = join(env.dir, 'runc-noting');
  await writeFile(wrapper, `#!/bin/sh\necho "$*" >> ${calls}\nexec ${RUNC} "$@"\n`);
  await chmod(wrapper, 0o755);
  const rt = new OciRuntime({ runtimePath: wrapper, conmonPath: CONMON, root: env.root, stateDir: env.stateDir, log: silentLogger, cgroupManager: 'cgroupfs' });
  const deletes = async () => (await readFile(calls, 'utf8').catch(() => '')).split('\n').filter((l) => /(^| )delete /.test(l));
  const exited = async (id: string, bundle: string) => {
    await rt.create({ id, bundle, logPath: env.logPath(id) });
    await rt.start(id);
    await waitFor('exit', () => rt.exitStatus(id));
    assert.equal((await rt.state(id))?.status, 'stopped');
  };

  const plain = uniqueId('del');
  const plainBundle = await env.bundle(plain, ['/bin/sh', '-c', 'exit 0']);
  await exited(plain, plainBundle);
  assert.equal(await cgroupExists(plain), true);
  await rt.delete(plain, { force: true, bundle: plainBundle });
  assert.deepEqual(await deletes(), []);
  assert.equal(await rt.state(plain), undefined);
  assert.ok(!(await runcIds(env.root)).includes(plain), 'runc still lists the container');
  assert.equal(await cgroupExists(plain), false);

  const hooked = uniqueId('del');
  const hookedBundle = await env.bundle(hooked, ['/bin/sh', '-c', 'exit 0']);
  const ran = join(env.dir, 'poststop-ran');
  const spec = JSON.parse(await readFile(join(hookedBundle, 'config.json'), 'utf8'));
  spec.hooks = { poststop: [{ path: '/bin/sh', args: ['sh', '-c', `touch ${ran}`] }] };
  await writeFile(join(hookedBundle, 'config.json'), JSON.stringify(spec));
  await exited(hooked, hookedBundle);
  await rt.delete(hooked, { force: true, bundle: hookedBundle });
  assert.equal((await deletes()).length, 1, 'runc delete ran the container with a poststop hook');
  assert.ok(await stat(ran).then(() => true, () => false), 'the poststop hook did not run');
  assert.equal(await cgroupExists(hooked), false);
  assert.deepEqual(await runcIds(env.root), []);
});

test('exit codes 0, 1 and 137 (killed) come from conmon exit files', async (t) => {
  const env = await setup(t);
  // The container's PID 1 cannot be SIGKILLed from inside its own namespace: 137 is killed from outside.
  const cases: [string[], number, boolean][] = [
    [['/bin/sh', '-c', 'exit 0'], 0, false],
    [['/bin/sh', '-c', 'exit 1'], 1, false],
    [['/bin/sleep', '100'], 137, true],
  ];
  await Promise.all(cases.map(async ([args, want, kill]) => {
    const id = uniqueId('exit');
    await env.rt.create({ id, bundle: await env.bundle(id, args), logPath: env.logPath(id) });
    await env.rt.start(id);
    if (kill) await env.rt.kill(id, 'SIGKILL');
    const exit = await waitFor(`exit of ${args.join(' ')}`, () => env.rt.exitStatus(id));
    assert.equal(exit.exitCode, want, args.join(' '));
    assert.equal((await env.rt.state(id))?.status, 'stopped');
    await env.rt.delete(id);
  }));
});

test('stop sends the stop signal, waits the timeout, then kills; stop is idempotent', async (t) => {
  const env = await setup(t);
  const polite = uniqueId('polite');
  const stubborn = uniqueId('stubborn');
  await env.rt.create({ id: polite, bundle: await env.bundle(polite, ['/bin/sh', '-c', 'trap "exit 7" USR1; while :; do sleep 0.1; done']), logPath: env.logPath(polite) });
  await env.rt.create({ id: stubborn, bundle: await env.bundle(stubborn, ['/bin/sh', '-c', 'trap "echo ignored TERM" TERM; while :; do sleep 0.1; done']), logPath: env.logPath(stubborn) });
  await env.rt.start(polite);
  await env.rt.start(stubborn);
  await new Promise((r) => setTimeout(r, 300)); // let the shells install their traps

  await env.rt.stop(polite, { timeoutSec: 10, signal: 'SIGUSR1' });
  // It exited on the signal by itself (7), not killed at the end of the timeout (137).
  assert.equal((await env.rt.exitStatus(polite))?.exitCode, 7);

  await env.rt.stop(stubborn, { timeoutSec: 2 });
  // It got TERM first and was still running to answer it (its trap wrote to the log), then it was killed (137).
  assert.match(await readFile(env.logPath(stubborn), 'utf8'), /stdout F ignored TERM/);
  assert.equal((await env.rt.exitStatus(stubborn))?.exitCode, 137);

  await env.rt.stop(stubborn, { timeoutSec: 2 }); // already stopped: returns at once
  await assert.rejects(env.rt.kill(stubborn, 'TERM'), FailedPrecondition);
  await env.rt.delete(polite);
  await env.rt.delete(stubborn);
});

test('stopping a container that was created but never started kills it at once', async (t) => {
  const env = await setup(t);
  const id = uniqueId('created');
  await env.rt.create({ id, bundle: await env.bundle(id, ['/bin/sleep', '100']), logPath: env.logPath(id) });
  await env.rt.stop(id, { timeoutSec: 30 });
  // Killed, not asked: its process never ran, so there is no grace period to give.
  assert.equal((await env.rt.exitStatus(id))?.exitCode, 137);
  await env.rt.delete(id);
  assert.deepEqual(await runcIds(env.root), []);
});

test('delete refuses a running container without force, and force deletes it completely', async (t) => {
  const env = await setup(t);
  const id = uniqueId('force');
  await env.rt.create({ id, bundle: await env.bundle(id, ['/bin/sleep', '100']), logPath: env.logPath(id) });
  await env.rt.start(id);
  await assert.rejects(env.rt.delete(id), FailedPrecondition);
  await env.rt.delete(id, { force: true });
  assert.equal(await env.rt.state(id), undefined);
  assert.deepEqual(await conmonsMentioning(env.stateDir), []);
  assert.equal(await cgroupExists(id), false);
  await env.rt.delete(id); // unknown id: nothing to do
});

test('a failing runc create surfaces runc\'s error and leaves nothing behind', async (t) => {
  const env = await setup(t);
  const id = uniqueId('bad');
  const bundle = await env.bundle(id, ['/no/such/binary']);
  await assert.rejects(env.rt.create({ id, bundle, logPath: env.logPath(id) }), (err: Error) => {
    assert.ok(err instanceof Internal, String(err));
    assert.match(err.message, /no such file or directory/);
    assert.match(err.message, new RegExp(id));
    return true;
  });
  assert.equal(await env.rt.state(id), undefined);
  assert.deepEqual(await runcIds(env.root), []);
  assert.deepEqual(await conmonsMentioning(env.stateDir), []);
  assert.deepEqual(await readdir(join(env.stateDir, 'containers')), []);
  assert.equal(await cgroupExists(id), false);
});

test('bad ids and duplicate creates are rejected with typed errors', async (t) => {
  const env = await setup(t);
  await assert.rejects(env.rt.create({ id: '../x', bundle: '/tmp', logPath: '/tmp/x.log' }), InvalidArgument);
  await assert.rejects(env.rt.state('a/b'), InvalidArgument);
  const other = uniqueId('nobundle');
  await assert.rejects(env.rt.create({ id: other, bundle: `${env.dir}/missing`, logPath: env.logPath(other) }), /has no config.json/);
  const b = await env.bundle(other, ['/bin/true']);
  await assert.rejects(env.rt.create({ id: other, bundle: b, logPath: `${env.dir}/nodir/x.log` }), /log directory .* does not exist/);
  const id = uniqueId('dup');
  const bundle = await env.bundle(id, ['/bin/sleep', '100']);
  await env.rt.create({ id, bundle, logPath: env.logPath(id) });
  await assert.rejects(env.rt.create({ id, bundle, logPath: env.logPath(id) }), AlreadyExists);
  assert.deepEqual(await env.rt.list(), [id]);
  await env.rt.delete(id, { force: true });
});

test('reopenLog makes conmon start a new file after the old one was renamed', async (t) => {
  const env = await setup(t);
  const id = uniqueId('reopen');
  const logPath = env.logPath(id);
  await env.rt.create({ id, bundle: await env.bundle(id, ['/bin/sh', '-c', 'i=0; while :; do i=$((i+1)); echo line $i; sleep 0.05; done']), logPath });
  await env.rt.start(id);
  await waitFor('first lines', async () => (await stat(logPath)).size > 0);
  await rename(logPath, `${logPath}.1`);
  await env.rt.reopenLog(id);
  const fresh = await waitFor('lines in the new file', async () => {
    const text = await readFile(logPath, 'utf8');
    return text.includes('\n') ? text : undefined;
  });
  const first = parseCriLog(fresh)[0]!;
  assert.match(first.content, /^line \d+$/);
  const old = parseCriLog(await readFile(`${logPath}.1`, 'utf8'));
  assert.ok(Number(first.content.split(' ')[1]) > Number(old.at(-1)!.content.split(' ')[1]) - 1);
  await env.rt.stop(id, { timeoutSec: 1 });
  await env.rt.delete(id);
  await assert.rejects(env.rt.reopenLog(id), /not known/);
});

test('update changes the container cgroup limits through runc update', async (t) => {
  const env = await setup(t);
  const id = uniqueId('update');
  await env.rt.create({ id, bundle: await env.bundle(id, ['/bin/sleep', '100'], { resources: { memory: { limit: 64 * 1024 * 1024 } } }), logPath: env.logPath(id) });
  await env.rt.start(id);
  await env.rt.update(id, { memory: { limit: 96 * 1024 * 1024, swap: 96 * 1024 * 1024 } });
  const limit = await readFile(`/sys/fs/cgroup/memory/minicri-rt-test/${id}/memory.limit_in_bytes`, 'utf8');
  assert.equal(Number(limit), 96 * 1024 * 1024);
  await env.rt.delete(id, { force: true });
});
