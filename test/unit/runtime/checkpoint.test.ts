// The checkpoint archive's layout (names, config.dump, bind.mounts, the rootfs diff), the runc command line,
// CRIU's log, the request checks, and the archive writer on a temp dir with overlayfs's whiteout and opaque marks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { renameSync, symlinkSync, watch } from 'node:fs';
import { lstat, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setAttribute } from '@napi-rs/xattr';
import { execa } from 'execa';
import { DeadlineExceeded, FailedPrecondition, Internal, InvalidArgument, ResourceExhausted } from '../../../core/errors.js';
import { scanUpper, tarError, writeArchive, writeRootfsDiff } from '../../../oci/runtime/checkpoint-archive.js';
import { archiveMembers, bindMountsDump, configDump, rfc3339Nano, rootfsDiff } from '../../../oci/runtime/checkpoint-layout.js';
import { checkpointArgs, criuErrors, isDumpOf, isFreezeRace } from '../../../oci/runtime/checkpoint.js';
import { checkpointLocation, checkpointTimeoutMs, DEFAULT_CHECKPOINT_TIMEOUT_SEC } from '../../../pod/container-checkpoint.js';

test('the archive holds what CRI-O puts in it, in its order, and only what was made', () => {
  const all = new Set(['rootfs-diff.tar', 'checkpoint', 'spec.dump', 'config.dump', 'stats-dump', 'dump.log', 'deleted.files', 'bind.mounts', 'restore.log']);
  assert.deepEqual(archiveMembers(all), ['stats-dump', 'dump.log', 'checkpoint', 'config.dump', 'spec.dump', 'bind.mounts', 'rootfs-diff.tar', 'deleted.files']);
  assert.deepEqual(archiveMembers(new Set(['checkpoint', 'config.dump', 'spec.dump'])), ['checkpoint', 'config.dump', 'spec.dump']);
});

test('config.dump names the container, its image, runtime and pod, and both times as Go writes them', () => {
  const dump = configDump({
    id: 'c0ffee', name: 'counter', image: { id: 'sha256:abc', name: 'registry.local/busybox:1' }, runtimeHandler: 'runc',
    createdAt: '1764076800123456789', pod: { namespace: 'shop', name: 'web', uid: 'u-1' },
  }, new Date(Date.UTC(2026, 10, 25, 13, 0, 5, 250)));
  assert.deepEqual(dump, {
    id: 'c0ffee', name: 'counter', rootfsImage: 'registry.local/busybox:1', rootfsImageRef: 'sha256:abc',
    rootfsImageName: 'registry.local/busybox:1', runtime: 'runc', createdTime: '2025-11-25T13:20:00.123456789Z',
    checkpointedTime: '2026-11-25T13:00:05.25Z', restored: false, podNamespace: 'shop', podName: 'web', podUid: 'u-1',
  });
  assert.equal(rfc3339Nano(0n), '1970-01-01T00:00:00Z');
  assert.equal(rfc3339Nano(1_000_000_001n), '1970-01-01T00:00:01.000000001Z');
});

test('bind.mounts records bind mounts with their source type and mode, not the runtime\'s own mounts or gone sources', () => {
  const stats: Record<string, { isDirectory: boolean; mode: number }> = {
    '/var/lib/kubelet/pods/p/volumes/data': { isDirectory: true, mode: 0o40755 },
    '/var/lib/minicri/pods/p/hosts': { isDirectory: false, mode: 0o100644 },
    '/dev/shm-of-pod': { isDirectory: true, mode: 0o41777 },
  };
  const dump = bindMountsDump([
    { destination: '/proc', type: 'proc', source: 'proc' },
    { destination: '/data', type: 'bind', source: '/var/lib/kubelet/pods/p/volumes/data', options: ['rbind', 'rw'] },
    { destination: '/etc/hosts', source: '/var/lib/minicri/pods/p/hosts', options: ['rbind', 'ro'] },
    { destination: '/dev/shm', type: 'bind', source: '/dev/shm-of-pod', options: ['rbind'] },
    { destination: '/gone', type: 'bind', source: '/no/such/source' },
  ], (s) => stats[s]);
  assert.deepEqual(dump, [
    { source: '/var/lib/kubelet/pods/p/volumes/data', destination: '/data', file_type: 'directory', permissions: 0o755 },
    { source: '/var/lib/minicri/pods/p/hosts', destination: '/etc/hosts', file_type: 'file', permissions: 0o644 },
  ]);
});

test('the rootfs diff takes the container\'s changes, lists its deletions, and leaves mount points out', () => {
  const diff = rootfsDiff([
    { path: 'counter', kind: 'other' },
    { path: 'dev', kind: 'other' },
    { path: 'dev/termination-log', kind: 'other' },
    { path: 'etc', kind: 'other' },
    { path: 'etc/hosts', kind: 'other' },
    { path: 'etc/motd', kind: 'whiteout' },
    { path: 'data', kind: 'other' },
    { path: 'data/x', kind: 'other' },
    { path: 'run', kind: 'other' },
    { path: 'run/app.pid', kind: 'other' },
    { path: 'var', kind: 'other' },
    { path: 'var/cache', kind: 'opaque-dir' },
    { path: 'var/cache/new', kind: 'other' },
  ], [{ destination: '/dev', type: 'tmpfs' }, { destination: '/etc/hosts' }, { destination: '/data/' }]);
  // /run is the container's own here: nothing is mounted there.
  assert.deepEqual(diff.include, ['counter', 'etc', 'run', 'run/app.pid', 'var', 'var/cache', 'var/cache/new']);
  assert.deepEqual(diff.deleted, ['/etc/motd', '/var/cache']);
});

test('runc is asked for a dump that leaves the container running, into the given dirs', () => {
  assert.deepEqual(checkpointArgs('c1', { imagePath: '/w/checkpoint', workPath: '/w' }),
    ['checkpoint', '--leave-running', '--file-locks', '--image-path', '/w/checkpoint', '--work-path', '/w', 'c1']);
  assert.deepEqual(checkpointArgs('c1', { imagePath: '/w/checkpoint', workPath: '/w', tcpEstablished: true }),
    ['checkpoint', '--leave-running', '--file-locks', '--tcp-established', '--image-path', '/w/checkpoint', '--work-path', '/w', 'c1']);
});

test('a cut-off dump is found by runc\'s global flags, the checkpoint command and the container id, whatever runs it', () => {
  const runc = { path: '/usr/sbin/runc', args: ['--root=/run/minicri/runc', '--criu=/opt/criu'] };
  const dump = (id: string, ...global: string[]) => [...global, 'checkpoint', ...checkpointArgs(id, { imagePath: '/w/i', workPath: '/w' }).slice(1)];
  assert.equal(isDumpOf(['/usr/sbin/runc', ...dump('c1', ...runc.args)], runc, 'c1'), true);
  assert.equal(isDumpOf(['/bin/sh', '/t/stand-in-runc', ...dump('c1', ...runc.args)], runc, 'c1'), true, 'a stand-in run by its interpreter');
  assert.equal(isDumpOf(['/usr/sbin/runc', ...dump('c2', ...runc.args)], runc, 'c1'), false, 'another container');
  assert.equal(isDumpOf(['/usr/sbin/runc', ...dump('c1', '--root=/run/other', '--criu=/opt/criu')], runc, 'c1'), false, 'another root');
  assert.equal(isDumpOf(['/usr/sbin/runc', ...runc.args, 'restore', 'c1'], runc, 'c1'), false, 'not a dump');
  assert.equal(isDumpOf(['checkpoint', 'c1'], { path: 'runc', args: [] }, 'c1'), false, 'no program');
});

test('tar failing on a full disk or a directory it may not write in is the node\'s to fix, anything else ours', () => {
  assert.ok(tarError('the archive', 'tar: /out/x: Cannot write: No space left on device') instanceof ResourceExhausted);
  assert.ok(tarError('the archive', 'tar: /out/x: Cannot open: Read-only file system') instanceof FailedPrecondition);
  assert.ok(tarError('the archive', 'tar: invalid option') instanceof Internal);
});

test('CRIU\'s first error lines are picked from its log, without their timestamps', () => {
  const log = [
    '(00.000012) Running on node Linux 6.18',
    '(00.020769) Error (criu/vdso.c:381): vdso: Unexpected rt vDSO area bounds',
    '(00.020771) Error (criu/vdso.c:613): vdso: Failed to fill self vdso symtable',
    '(00.020900) Warn  (criu/net.c:1): something',
  ].join('\n');
  assert.deepEqual(criuErrors(log), ['Error (criu/vdso.c:381): vdso: Unexpected rt vDSO area bounds', 'Error (criu/vdso.c:613): vdso: Failed to fill self vdso symtable']);
  assert.deepEqual(criuErrors(log, 1), ['Error (criu/vdso.c:381): vdso: Unexpected rt vDSO area bounds'], 'the first: the cause');
  assert.deepEqual(criuErrors(''), []);
});

test('a freeze that caught a process mid-exit is told from other CRIU failures: it is worth another try', () => {
  // CRIU 4.2's lines of such a dump (a counter's `sleep` child frozen as it exited), as criuErrors gives them.
  assert.ok(isFreezeRace(['Error (criu/seize.c:335): zombie 22203 (comm sh) found while seizing', 'Error (criu/cr-dump.c:1808): Timeout reached. Try to interrupt: 0']));
  assert.ok(!isFreezeRace(['Error (criu/vdso.c:381): vdso: Unexpected rt vDSO area bounds']));
  assert.ok(!isFreezeRace([]));
});

test('the location must be a non-empty absolute file path; the timeout 0 (the default) or positive', () => {
  assert.equal(checkpointLocation('/var/lib/kubelet/checkpoints/c.tar'), '/var/lib/kubelet/checkpoints/c.tar');
  assert.throws(() => checkpointLocation(''), InvalidArgument);
  assert.throws(() => checkpointLocation('c.tar'), /not an absolute path/);
  assert.throws(() => checkpointLocation('/tmp/dir/'), /names a directory/);
  assert.equal(checkpointTimeoutMs(0), DEFAULT_CHECKPOINT_TIMEOUT_SEC * 1000);
  assert.equal(checkpointTimeoutMs(7), 7000);
  assert.throws(() => checkpointTimeoutMs(-1), InvalidArgument);
});

test('the writer turns an overlay upper dir into rootfs-diff.tar and deleted.files, and the work dir into one private archive', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'minicri-ckpt-unit-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const upper = join(dir, 'upper');
  const work = join(dir, 'work');
  await mkdir(join(upper, 'etc'), { recursive: true });
  await mkdir(join(upper, 'var', 'cache'), { recursive: true });
  await mkdir(join(work, 'checkpoint'), { recursive: true });
  await writeFile(join(upper, 'counter'), '42\n');
  await writeFile(join(upper, 'etc', 'hosts'), 'mount point\n');
  await writeFile(join(upper, 'var', 'cache', 'new'), 'n');
  await execa('mknod', [join(upper, 'etc', 'motd'), 'c', '0', '0']); // overlayfs's whiteout
  await setAttribute(join(upper, 'var', 'cache'), 'trusted.overlay.opaque', 'y');
  assert.deepEqual(await scanUpper(upper), [
    { path: 'counter', kind: 'other' }, { path: 'etc', kind: 'other' }, { path: 'etc/hosts', kind: 'other' },
    { path: 'etc/motd', kind: 'whiteout' }, { path: 'var', kind: 'other' }, { path: 'var/cache', kind: 'opaque-dir' },
    { path: 'var/cache/new', kind: 'other' },
  ]);

  await writeRootfsDiff(upper, work, [{ destination: '/etc/hosts', type: 'bind', source: '/x' }], AbortSignal.timeout(10_000));
  assert.deepEqual(JSON.parse(await readFile(join(work, 'deleted.files'), 'utf8')), ['/etc/motd', '/var/cache']);
  const diff = (await execa('tar', ['-tf', join(work, 'rootfs-diff.tar')])).stdout.split('\n');
  assert.deepEqual(diff, ['counter', 'etc/', 'var/', 'var/cache/', 'var/cache/new']);

  await writeFile(join(work, 'checkpoint', 'inventory.img'), 'img');
  await writeFile(join(work, 'config.dump'), '{}');
  await writeFile(join(work, 'spec.dump'), '{}');
  const location = join(dir, 'out', 'c.tar');
  await mkdir(join(dir, 'out'));
  await writeArchive(work, location, AbortSignal.timeout(10_000));
  assert.equal((await stat(location)).mode & 0o777, 0o600, 'memory pages are for root alone');
  const members = (await execa('tar', ['-tf', location])).stdout.split('\n');
  assert.deepEqual(members, ['checkpoint/', 'checkpoint/inventory.img', 'config.dump', 'spec.dump', 'rootfs-diff.tar', 'deleted.files']);
  // An archive is never replaced, and a failed write leaves no partial file beside it.
  await assert.rejects(writeArchive(work, location, AbortSignal.timeout(10_000)), InvalidArgument);
  const aborted = AbortSignal.abort();
  await assert.rejects(writeArchive(work, join(dir, 'out', 'd.tar'), aborted), DeadlineExceeded);
  assert.deepEqual((await execa('ls', ['-A', join(dir, 'out')])).stdout.split('\n'), ['c.tar']);

  // Whoever writes in the directory swaps the temporary file for a symlink to another file as soon as it appears:
  // tar writes to the file created, not through the name, and nothing is linked into place.
  const victim = join(dir, 'victim');
  await writeFile(victim, 'untouched');
  let swapped = false;
  const watcher = watch(join(dir, 'out'), (_event, name) => {
    if (swapped || !name?.endsWith('.partial')) return;
    swapped = true;
    const partial = join(dir, 'out', name);
    try {
      renameSync(partial, `${partial}.moved`);
      symlinkSync(victim, partial);
    } catch {
      // our own removal of it
    }
  });
  try {
    await assert.rejects(writeArchive(work, join(dir, 'out', 'e.tar'), AbortSignal.timeout(10_000)), FailedPrecondition);
  } finally {
    watcher.close();
  }
  assert.equal(await readFile(victim, 'utf8'), 'untouched', 'nothing written through the swapped name');
  await assert.rejects(lstat(join(dir, 'out', 'e.tar')), { code: 'ENOENT' });
});
