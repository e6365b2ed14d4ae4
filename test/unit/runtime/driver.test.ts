// Pure parts of the runc/conmon driver and exec-sync, and its delete of what runc no longer knows.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildConmonArgs, parseSyncMessage, type ConmonLaunch } from '../../../oci/runtime/conmon.js';
import { runcErrorText, isNotExist, isNotRunning } from '../../../oci/runtime/runc-errors.js';
import { parseExitFile, normalizeSignal, conmonLogLevel, signalNumber, OciRuntime } from '../../../oci/runtime/runc.js';
import { silentLogger } from '../../../core/log.js';
import { CappedBuffer } from '../../../core/capped-buffer.js';
import { Internal, InvalidArgument } from '../../../core/errors.js';

const launch: ConmonLaunch = {
  id: 'c1', bundle: '/b', runtimePath: '/usr/sbin/runc', runtimeArgs: ['--root=/run/r'], logPath: '/l/c1.log',
  exitDir: '/s/exits', persistDir: '/s/containers/c1', socketDir: '/s/sockets', containerPidFile: '/s/containers/c1/pid',
  conmonPidFile: '/s/containers/c1/conmon.pid', logLevel: 'info',
};

function flagValue(args: string[], flag: string): string | undefined {
  const i = args.indexOf(flag);
  return i < 0 ? undefined : args[i + 1];
}

test('conmon command line carries ids, paths, the k8s-file log driver and runc flags', () => {
  const a = buildConmonArgs(launch);
  assert.equal(flagValue(a, '--api-version'), '1');
  assert.equal(flagValue(a, '-c'), 'c1');
  assert.equal(flagValue(a, '-u'), 'c1');
  assert.equal(flagValue(a, '-r'), '/usr/sbin/runc');
  assert.equal(flagValue(a, '-b'), '/b');
  assert.equal(flagValue(a, '-l'), 'k8s-file:/l/c1.log');
  assert.equal(flagValue(a, '--exit-dir'), '/s/exits');
  assert.equal(flagValue(a, '--persist-dir'), '/s/containers/c1');
  assert.equal(flagValue(a, '--runtime-arg'), '--root=/run/r');
  for (const f of ['-i', '-t', '-s', '--leave-stdin-open']) assert.ok(!a.includes(f), f);
});

test('a restore has conmon run runc restore of the images, file locks as dumped, the spec\'s AppArmor profile; a create has no restore flags', () => {
  const a = buildConmonArgs({ ...launch, restore: { imagePath: '/b/restore/checkpoint' } });
  assert.equal(flagValue(a, '--restore'), '/b/restore/checkpoint');
  assert.equal(flagValue(a, '--runtime-opt'), '--file-locks');
  assert.ok(!a.some((x) => x.startsWith('--lsm-profile')), 'no profile: none passed');
  // The spec's AppArmor profile, for CRIU to give the restored processes instead of the dumped one's.
  const confined = buildConmonArgs({ ...launch, restore: { imagePath: '/b/restore/checkpoint', lsmProfile: 'apparmor:minicri-default' } });
  const opts = confined.flatMap((x, i) => (confined[i - 1] === '--runtime-opt' ? [x] : []));
  assert.deepEqual(opts, ['--file-locks', '--lsm-profile=apparmor:minicri-default']);
  const create = buildConmonArgs(launch);
  assert.ok(!create.includes('--restore') && !create.includes('--runtime-opt'));
});

test('runc gets the configured CRIU as a global flag, runc\'s own default without one', () => {
  const o = { runtimePath: '/usr/sbin/runc', conmonPath: '/usr/bin/conmon', root: '/run/r', stateDir: '/s', log: silentLogger };
  assert.deepEqual(new OciRuntime({ ...o, criuPath: '/opt/criu/sbin/criu' }).commandLine().args, ['--root=/run/r', '--criu=/opt/criu/sbin/criu']);
  assert.deepEqual(new OciRuntime(o).commandLine().args, ['--root=/run/r']);
});

test('a delete removes the state directory an interrupted delete left without its state file', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'minicri-runc-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const root = join(dir, 'runc');
  await mkdir(join(root, 'pause1'), { recursive: true });
  await writeFile(join(root, 'pause1', 'leftover'), '');
  await mkdir(join(root, 'other'));
  const runtime = new OciRuntime({ runtimePath: '/nonexistent/runc', conmonPath: '/nonexistent/conmon', root, stateDir: join(dir, 's'), log: silentLogger });
  await runtime.delete('pause1', { force: true });
  assert.deepEqual(await readdir(root), ['other']);
});

test('conmon stdin/tty/systemd flags follow the request', () => {
  const a = buildConmonArgs({ ...launch, stdin: true, stdinOnce: false, tty: true, systemdCgroup: true });
  for (const f of ['-i', '-t', '-s', '--leave-stdin-open']) assert.ok(a.includes(f), f);
  const once = buildConmonArgs({ ...launch, stdin: true, stdinOnce: true });
  assert.ok(once.includes('-i') && !once.includes('--leave-stdin-open'));
});

test('sync messages: a pid, or runc\'s error text without logrus noise', () => {
  assert.deepEqual(parseSyncMessage('{"data": 5703}'), { ok: true, pid: 5703 });
  const fail = parseSyncMessage(String.raw`{"data": -1, "message": "time=\"2026-11-22T06:09:34Z\" level=error msg=\"runc create failed: unable to start container process: exec: \\\"/nonexistent\\\": stat /nonexistent: no such file or directory\"\n"}`);
  assert.deepEqual(fail, { ok: false, message: 'runc create failed: unable to start container process: exec: "/nonexistent": stat /nonexistent: no such file or directory' });
  assert.deepEqual(parseSyncMessage('{"data": -1}'), { ok: false, message: 'runtime failed with status -1' });
  assert.throws(() => parseSyncMessage('not json'), Internal);
  assert.throws(() => parseSyncMessage('{"pid": 3}'), Internal);
});

test('runc error text and classification', () => {
  assert.equal(runcErrorText('time="x" level=error msg="container does not exist"\n'), 'container does not exist');
  assert.equal(runcErrorText('time="x" level=warning msg="a"\ntime="y" level=error msg="b \\"q\\""\n'), 'a; b "q"');
  assert.equal(runcErrorText('  plain failure \n'), 'plain failure');
  assert.ok(isNotExist('container does not exist'));
  assert.ok(isNotRunning('container not running'));
  assert.ok(!isNotExist('permission denied'));
});

test('exit files, signals and log levels', () => {
  assert.equal(parseExitFile('137'), 137);
  assert.equal(parseExitFile('0\n'), 0);
  assert.throws(() => parseExitFile(''), Internal);
  assert.throws(() => parseExitFile('x1'), Internal);
  assert.equal(normalizeSignal('SIGTERM'), 'SIGTERM');
  assert.equal(normalizeSignal('term'), 'SIGTERM');
  assert.equal(normalizeSignal(9), '9');
  assert.equal(normalizeSignal('15'), '15');
  assert.equal(normalizeSignal('SIGRTMIN+3'), 'SIGRTMIN+3');
  assert.throws(() => normalizeSignal(0), InvalidArgument);
  assert.throws(() => normalizeSignal('SIG TERM'), InvalidArgument);
  assert.equal(signalNumber('term'), 15);
  assert.equal(signalNumber('SIGKILL'), 9);
  assert.equal(signalNumber('10'), 10);
  assert.equal(signalNumber('SIGRTMIN'), 34);
  assert.equal(signalNumber('SIGRTMIN+3'), 37);
  assert.equal(signalNumber('SIGRTMAX-2'), 62);
  assert.throws(() => signalNumber('SIGRTMAX+1'), InvalidArgument);
  assert.throws(() => signalNumber('SIGNOPE'), /not a Linux signal/);
  assert.equal(conmonLogLevel('trace'), 'debug');
  assert.equal(conmonLogLevel('info'), 'info');
  assert.equal(conmonLogLevel('silent'), 'error');
});

test('CappedBuffer keeps the first cap bytes and counts the rest', () => {
  const b = new CappedBuffer(5);
  b.push(Buffer.from('abc'));
  b.push(Buffer.from('defg'));
  b.push(Buffer.from('hij'));
  assert.equal(b.toBuffer().toString(), 'abcde');
  assert.equal(b.total, 10);
  assert.equal(b.truncated, true);
  const exact = new CappedBuffer(3);
  exact.push(Buffer.from('abc'));
  assert.equal(exact.truncated, false);
  assert.equal(new CappedBuffer(0).toBuffer().length, 0);
  assert.throws(() => new CappedBuffer(-1), InvalidArgument);
});
