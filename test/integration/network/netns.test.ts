import { test } from 'node:test';
import assert from 'node:assert/strict';
import { lstat, mkdtemp, readFile, readlink, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { createPodNetns, listPodNetns, netnsExists, removePodNetns, setNetnsSysctls } from '../../../netns/netns.js';
import { InvalidArgument, NotFound } from '../../../core/errors.js';
import { inNetns } from '../../support/cni-env.js';

test('pod netns: pinned nsfs file plus named symlink, removed cleanly and idempotently', async (t) => {
  const ns = await createPodNetns('mcnt-pod-a');
  t.after(() => removePodNetns(ns));
  assert.match(path.basename(ns.path), /^minicri-[0-9a-f]{16}$/);
  assert.match(path.basename(ns.symlink), /^mcnt-pod-a-[0-9a-f]{16}$/);
  assert.equal(path.dirname(ns.path), '/var/run/netns');
  assert.equal(await readlink(ns.symlink), ns.path);
  assert.equal(await realpath(ns.symlink), await realpath(ns.path));
  assert.ok(await netnsExists(ns.path));
  assert.ok(await netnsExists(ns.symlink));
  assert.ok((await listPodNetns()).includes(ns.path));
  assert.ok(!(await listPodNetns()).includes(ns.symlink));
  // iproute2 sees it (shared mount point it manages) and it is a different namespace from ours.
  assert.match(String((await execa('ip', ['netns', 'list'])).stdout), new RegExp(path.basename(ns.path)));
  const inode = String((await execa('stat', ['-L', '-c', '%i', ns.path])).stdout);
  assert.notEqual(inode, String((await execa('stat', ['-L', '-c', '%i', '/proc/self/ns/net'])).stdout));
  assert.match(await inNetns(ns.path, ['ip', '-o', 'link']), /^1: lo:/);

  await removePodNetns(ns);
  assert.ok(!(await netnsExists(ns.path)));
  await assert.rejects(lstat(ns.path), { code: 'ENOENT' });
  await assert.rejects(lstat(ns.symlink), { code: 'ENOENT' });
  assert.ok(!(await readFile('/proc/self/mountinfo', 'utf8')).includes(path.basename(ns.path)));
  await removePodNetns(ns); // gone already: fine
  await removePodNetns({ path: ns.path }); // without symlink: fine
  assert.ok(!(await listPodNetns()).includes(ns.path));
});

test('removePodNetns tolerates either part being gone and never deletes a non-symlink', async (t) => {
  const ns = await createPodNetns('mcnt-pod-b');
  t.after(() => removePodNetns(ns));
  await rm(ns.symlink);
  await writeFile(ns.symlink, 'not ours');
  t.after(() => rm(ns.symlink, { force: true }));
  await removePodNetns(ns);
  assert.equal(await readFile(ns.symlink, 'utf8'), 'not ours');
  assert.ok(!(await netnsExists(ns.path)));
});

test('netns in a custom dir is pinned the same way (shared bind mount of the dir)', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'mcnt-netns-'));
  t.after(async () => {
    await execa('umount', ['--lazy', dir], { reject: false });
    await rm(dir, { recursive: true, force: true });
  });
  const ns = await createPodNetns('mcnt-pod-c', { dir });
  t.after(() => removePodNetns(ns));
  assert.equal(path.dirname(ns.path), dir);
  assert.ok(await netnsExists(ns.path));
  assert.deepEqual(await listPodNetns(dir), [ns.path]);
  const mountinfo = await readFile('/proc/self/mountinfo', 'utf8');
  const dirLine = mountinfo.split('\n').find((l) => l.split(' ')[4] === dir);
  assert.match(dirLine ?? '', /shared:/);
  await removePodNetns(ns);
  assert.deepEqual(await listPodNetns(dir), []);
  assert.ok(!(await netnsExists(ns.path)));
});

test('netnsExists is false for plain files and missing paths', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'mcnt-netns-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(path.join(dir, 'f'), '');
  assert.equal(await netnsExists(path.join(dir, 'f')), false);
  assert.equal(await netnsExists(path.join(dir, 'missing')), false);
  assert.deepEqual(await listPodNetns(path.join(dir, 'missing')), []);
});

test('net.* sysctls are set inside the pod netns only', async (t) => {
  const ns = await createPodNetns('mcnt-pod-d');
  t.after(() => removePodNetns(ns));
  const hostBefore = await readFile('/proc/sys/net/ipv4/ip_unprivileged_port_start', 'utf8');
  await setNetnsSysctls(ns.path, { 'net.ipv4.ip_unprivileged_port_start': '80', 'net.ipv4.ping_group_range': '0 2147483647' });
  assert.equal((await inNetns(ns.path, ['cat', '/proc/sys/net/ipv4/ip_unprivileged_port_start'])).trim(), '80');
  assert.match(await inNetns(ns.path, ['cat', '/proc/sys/net/ipv4/ping_group_range']), /^0\s+2147483647/);
  assert.equal(await readFile('/proc/sys/net/ipv4/ip_unprivileged_port_start', 'utf8'), hostBefore);
  await setNetnsSysctls(ns.path, {});
  await assert.rejects(setNetnsSysctls(ns.path, { 'net.ipv4.no_such_thing': '1' }), InvalidArgument);
  await assert.rejects(setNetnsSysctls(ns.path, { 'kernel.pid_max': '1' }), InvalidArgument);
  await removePodNetns(ns);
  await assert.rejects(setNetnsSysctls(ns.path, { 'net.ipv4.ip_forward': '1' }), NotFound);
});
