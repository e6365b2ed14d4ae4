import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, chown, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { idmapMount, MOUNTER, MS, MountError, mount, pinNetns, probeIdmap, unmount, unmountIfMounted } from '../../../mounter/mounter.js';
import { isMounted } from '../../../mounter/mounter.js';
import { liveProcesses } from '../../../oci/runtime/processes.js';
import { Internal } from '../../../core/errors.js';
import { unmountUnder } from '../../support/daemon.js';

async function scratch(t: { after(fn: () => Promise<void>): void }): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'mcri-mounter-'));
  t.after(async () => {
    // Checked first, then removed either way: a test that leaves a mount fails, and the host is still tidied.
    const left = (await readFile('/proc/self/mounts', 'utf8')).split('\n').map((l) => l.split(' ')[1] ?? '').filter((m) => m.startsWith(`${dir}/`) || m === dir);
    await unmountUnder(dir);
    await rm(dir, { recursive: true, force: true });
    assert.deepEqual(left, [], 'the test left these mounted');
  });
  return dir;
}

function mountLine(target: string, info: string): string | undefined {
  return info.split('\n').find((l) => l.split(' ')[4] === target);
}

/** Our own helper process (a child of this test process). */
async function ourHelper(): Promise<number> {
  const mine = (await liveProcesses('minicri-mounter', MOUNTER)).find((p) => p.ppid === process.pid);
  if (!mine) throw new Error('no minicri-mounter child of this process');
  return mine.pid;
}

test('mounter: a tmpfs with flags and data is mounted, then unmounted', async (t) => {
  const dir = await scratch(t);
  const target = path.join(dir, 'shm');
  await mkdir(target);
  await mount({ source: 'shm', target, fstype: 'tmpfs', flags: MS.NOSUID | MS.NODEV | MS.NOEXEC, data: 'mode=1777,size=1048576' });
  const line = mountLine(target, await readFile('/proc/self/mountinfo', 'utf8'));
  assert.ok(line, 'mounted');
  assert.match(line, / rw,nosuid,nodev,noexec,/);
  assert.match(line, / - tmpfs shm rw,.*size=1024k/);
  assert.equal((await stat(target)).mode & 0o7777, 0o1777);
  await unmount(target);
  assert.equal(await isMounted(target), false);
  // Nothing mounted, or nothing there at all: not an error for unmountIfMounted.
  assert.equal(await unmountIfMounted(target), false);
  assert.equal(await unmountIfMounted(path.join(dir, 'missing')), false);
});

test('mounter: failures carry the errno name and say what was asked', async (t) => {
  const dir = await scratch(t);
  const missing = path.join(dir, 'missing');
  await assert.rejects(mount({ source: 'shm', target: missing, fstype: 'tmpfs' }), (err: unknown) =>
    err instanceof MountError && err.code === 'ENOENT' && err.message === `mount tmpfs on ${missing}: No such file or directory (ENOENT)`);
  await assert.rejects(unmount(dir), (err: unknown) => err instanceof MountError && err.code === 'EINVAL' && err.message.startsWith(`unmount ${dir}:`));
  await assert.rejects(mount({ source: 'x', target: dir, fstype: 'no-such-fs' }), (err: unknown) => err instanceof MountError && err.code === 'ENODEV');
});

test('mounter: an overlay\'s relative lowerdirs resolve against the cwd given; a busy mount detaches lazily', async (t) => {
  const dir = await scratch(t);
  // A name no process's cwd holds: without the cwd given, the helper would not find it.
  const lower = path.basename(dir);
  for (const d of [`links/${lower}`, 'upper', 'work', 'merged']) await mkdir(path.join(dir, d), { recursive: true });
  await writeFile(path.join(dir, 'links', lower, 'hello'), 'from the lower layer');
  const merged = path.join(dir, 'merged');
  const data = `lowerdir=${lower},upperdir=${dir}/upper,workdir=${dir}/work`;
  await assert.rejects(mount({ source: 'overlay', target: merged, fstype: 'overlay', data }), MountError, 'without the cwd, the lower dir is not found');
  await mount({ source: 'overlay', target: merged, fstype: 'overlay', data, cwd: path.join(dir, 'links') });
  assert.equal(await readFile(path.join(merged, 'hello'), 'utf8'), 'from the lower layer');
  // A process with its cwd inside keeps it busy: a plain unmount fails, a lazy one detaches.
  const holder = execa('sleep', ['30'], { cwd: merged });
  t.after(() => { holder.kill('SIGKILL'); return holder.catch(() => {}); });
  await assert.rejects(unmount(merged), (err: unknown) => err instanceof MountError && err.code === 'EBUSY');
  await unmount(merged, { lazy: true });
  assert.equal(await isMounted(merged), false);
});

test('mounter: a netns pin is a new namespace on a shared mount point, and never reuses a name', async (t) => {
  const dir = await scratch(t);
  const nsDir = path.join(dir, 'netns');
  await mkdir(nsDir);
  const pin = path.join(nsDir, 'p1');
  await pinNetns(nsDir, pin);
  const info = await readFile('/proc/self/mountinfo', 'utf8');
  assert.match(mountLine(nsDir, info) ?? '', / shared:\d+/, 'the dir is a shared mount point');
  assert.match(mountLine(pin, info) ?? '', / - nsfs /);
  const ours = (await stat('/proc/self/ns/net')).ino;
  assert.notEqual((await stat(pin)).ino, ours);
  // Taken name: EEXIST, and the existing pin is untouched.
  await assert.rejects(pinNetns(nsDir, pin), (err: unknown) => err instanceof MountError && err.code === 'EEXIST');
  assert.match(mountLine(pin, await readFile('/proc/self/mountinfo', 'utf8')) ?? '', / - nsfs /);
  // A second pin in the same (already shared) dir is another namespace.
  const pin2 = path.join(nsDir, 'p2');
  await pinNetns(nsDir, pin2);
  assert.notEqual((await stat(pin2)).ino, (await stat(pin)).ino);
  for (const p of [pin, pin2]) assert.equal(await unmountIfMounted(p, { lazy: true }), true);
  // A dir that does not exist: nothing is made.
  await assert.rejects(pinNetns(path.join(dir, 'nope'), path.join(dir, 'nope', 'p')), (err: unknown) => err instanceof MountError && err.code === 'ENOENT');
  // The shared mount point the pins needed is the test's own to remove.
  await unmount(nsDir);
});

test('mounter: an unmount never follows a symlink at its target', async (t) => {
  const dir = await scratch(t);
  const target = path.join(dir, 'real');
  await mkdir(target);
  await mount({ source: 'tmpfs', target, fstype: 'tmpfs' });
  const link = path.join(dir, 'link');
  await symlink(target, link);
  assert.equal(await unmountIfMounted(link), false);
  assert.equal(await isMounted(target), true, 'the mount the link points at stays');
  await unmount(target);
});

test('mounter: flags that are no flag set are refused, by the client and by the helper, which goes on serving', async (t) => {
  const dir = await scratch(t);
  for (const flags of [1.5, -1, 2 ** 64]) {
    await assert.rejects(mount({ source: 'tmpfs', target: dir, fstype: 'tmpfs', flags }), (err: unknown) => err instanceof Internal && /flags/.test(err.message), String(flags));
  }
  // The helper itself, fed by hand: a bad flags field is answered EINVAL, the next request still served.
  const helper = execa(MOUNTER, [], { input: `1\0umount\0${dir}\0x\0` + `2\0umount\0${dir}\x000\0` });
  const lines = (await helper).stdout.split('\n').sort();
  assert.deepEqual(lines, ['1 22 flags: Invalid argument', '2 22 Invalid argument']);
});

test('mounter: the helper frames requests that arrive a byte at a time', async (t) => {
  const dir = await scratch(t);
  const target = path.join(dir, 't');
  await mkdir(target);
  const helper = execa(MOUNTER, []);
  const request = Buffer.from(`7\0mount\0tmpfs\0${target}\0tmpfs\x000\0size=64k\0\0`);
  // Listening before the last byte goes: the answer may come while the loop still waits a tick.
  const answered = new Promise<string>((resolve) => helper.stdout!.once('data', (b: Buffer) => resolve(b.toString())));
  for (const byte of request) {
    helper.stdin!.write(Buffer.from([byte]));
    await new Promise((r) => setImmediate(r));
  }
  const answer = await answered;
  helper.stdin!.end();
  await helper;
  assert.equal(answer, '7 0 \n');
  assert.equal(await isMounted(target), true);
  await unmount(target);
});

test('mounter: when the helper is killed mid-burst, every request it took still answers, and no failed one is mounted', async (t) => {
  const dir = await scratch(t);
  const targets = Array.from({ length: 40 }, (_, i) => path.join(dir, `k${i}`));
  await Promise.all(targets.map((d) => mkdir(d)));
  await unmountIfMounted(dir); // the helper is running
  const helper = await ourHelper();
  const attempt = (target: string) => mount({ source: 'tmpfs', target, fstype: 'tmpfs', data: 'size=64k' }).then(() => true, (err: unknown) => {
    assert.ok(err instanceof Internal && /minicri-mounter exited/.test(err.message), String(err));
    return false;
  });
  // The first half goes to a working helper; once one is answered it is stopped, so the second half is
  // sent but never read; then it is killed with some of the first half possibly still in flight.
  const taken = targets.slice(0, 20).map(attempt);
  assert.equal(await Promise.race(taken), true, 'the helper answers while it runs');
  process.kill(helper, 'SIGSTOP');
  const unread = targets.slice(20).map(attempt);
  process.kill(helper, 'SIGKILL');
  const done = await Promise.all([...taken, ...unread]);
  // Both paths ran: requests it took were answered, those it never read failed.
  assert.ok(done.slice(0, 20).includes(true));
  assert.deepEqual(done.slice(20), targets.slice(20).map(() => false), 'requests the helper never read fail');
  const info = await readFile('/proc/self/mountinfo', 'utf8');
  targets.forEach((target, i) => assert.equal(mountLine(target, info) !== undefined, done[i], `${target}: told ${done[i] ? 'mounted' : 'failed'}`));
  await Promise.all(targets.filter((_, i) => done[i]).map((target) => unmount(target)));
});

test('mounter: 40 mounts and unmounts at once all succeed', async (t) => {
  const dir = await scratch(t);
  const targets = Array.from({ length: 40 }, (_, i) => path.join(dir, `m${i}`));
  await Promise.all(targets.map((d) => mkdir(d)));
  await Promise.all(targets.map((target) => mount({ source: 'tmpfs', target, fstype: 'tmpfs', data: 'size=64k' })));
  const info = await readFile('/proc/self/mountinfo', 'utf8');
  for (const target of targets) assert.ok(mountLine(target, info), target);
  await Promise.all(targets.map((target) => unmount(target)));
  const after = await readFile('/proc/self/mountinfo', 'utf8');
  for (const target of targets) assert.equal(mountLine(target, after), undefined, target);
});

test('mounter: a helper that dies fails the requests it had, and the next call starts a new one', async (t) => {
  const dir = await scratch(t);
  await unmountIfMounted(dir); // the helper is running
  const helper = await ourHelper();
  // Stopped, it reads nothing: the request stays unanswered until the helper is killed.
  process.kill(helper, 'SIGSTOP');
  const pending = unmount(dir);
  process.kill(helper, 'SIGKILL');
  await assert.rejects(pending, (err: unknown) => err instanceof Internal && /^unmount .*: minicri-mounter exited \(SIGKILL\)/.test(err.message));
  const target = path.join(dir, 't');
  await mkdir(target);
  await mount({ source: 'tmpfs', target, fstype: 'tmpfs' });
  assert.notEqual(await ourHelper(), helper);
  await unmount(target);
});

test('mounter: an idle helper does not keep its process alive, and goes when that process does', async () => {
  const url = (rel: string) => JSON.stringify(new URL(rel, import.meta.url).href);
  // The child answers with the result and its helper's pid, then must exit on its own.
  const script = `
    const m = await import(${url('../../../mounter/mounter.js')});
    const { liveProcesses } = await import(${url('../../../oci/runtime/processes.js')});
    const result = await m.unmountIfMounted('/nonexistent-${process.pid}');
    const mine = (await liveProcesses('minicri-mounter', m.MOUNTER)).filter((p) => p.ppid === process.pid);
    console.log(result, mine.map((p) => p.pid).join(','));`;
  const { stdout } = await execa(process.execPath, ['--input-type=module', '-e', script], { timeout: 10_000 });
  const [result, pid] = stdout.split(' ');
  assert.equal(result, 'false');
  assert.match(pid ?? '', /^\d+$/);
  // stdin's EOF tells the helper to go.
  const deadline = Date.now() + 5000;
  while ((await liveProcesses('minicri-mounter', MOUNTER)).some((p) => p.pid === Number(pid))) {
    assert.ok(Date.now() < deadline, `helper ${pid} still running after its parent exited`);
    await new Promise((r) => setTimeout(r, 50));
  }
});

test('mounter: an id-mapped mount shows each file with the id its owner maps to, submounts too, and writes map back', async (t) => {
  const dir = await scratch(t);
  // The mapped ids below must pass through it.
  await chmod(dir, 0o711);
  const source = path.join(dir, 'src');
  const target = path.join(dir, 'dst');
  await mkdir(path.join(source, 'sub'), { recursive: true });
  await mkdir(target);
  await writeFile(path.join(source, 'root-file'), 'x');
  await writeFile(path.join(source, 'app-file'), 'x');
  await chown(path.join(source, 'app-file'), 1000, 1000);
  await mount({ source: 'tmpfs', target: path.join(source, 'sub'), fstype: 'tmpfs', data: 'size=1m' });
  const maps = { uids: [{ containerId: 0, hostId: 300000, size: 65536 }], gids: [{ containerId: 0, hostId: 400000, size: 65536 }] };
  await idmapMount(source, target, maps, { recursive: true });
  const owner = async (p: string) => { const st = await stat(path.join(target, p)); return [st.uid, st.gid]; };
  assert.deepEqual(await owner('root-file'), [300000, 400000]);
  assert.deepEqual(await owner('app-file'), [301000, 401000]);
  assert.deepEqual(await owner('sub'), [300000, 400000], 'the submount is id-mapped too');
  // A file made through the mount by a mapped id lands on disk as the id it maps from; the host's root,
  // which the mapping does not cover, cannot make one.
  await execa('setpriv', ['--reuid=300000', '--regid=400000', '--clear-groups', 'sh', '-c', `echo y > ${path.join(target, 'made')}`]);
  const made = await stat(path.join(source, 'made'));
  assert.deepEqual([made.uid, made.gid], [0, 0]);
  await assert.rejects(writeFile(path.join(target, 'by-host-root'), 'z'), /EOVERFLOW/);
  await unmount(path.join(target, 'sub'), { lazy: true });
  await unmount(target, { lazy: true });
  await unmount(path.join(source, 'sub'));
  assert.deepEqual(await probeIdmap(dir), { ok: true });
  // The throwaway user namespace's process is gone before the helper answers (it must not linger).
  const stray = (await liveProcesses('minicri-mounter', MOUNTER)).filter((p) => p.ppid === 1).map((p) => p.pid);
  assert.deepEqual(stray, [], 'no user namespace holder is left behind');
  await assert.rejects(idmapMount(path.join(dir, 'nope'), target, maps), (err: unknown) =>
    err instanceof MountError && err.code === 'ENOENT' && /open_tree/.test(err.message));
});
