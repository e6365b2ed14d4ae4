// What a restore takes of a checkpoint archive (names, entry types, config.dump, deleted.files, the rootfs diff's
// entries), and which image fields name an archive it may restore.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FailedPrecondition, InvalidArgument, PermissionDenied } from '../../../core/errors.js';
import {
  archiveEntryAction, diffEntryPath, MAX_DELETED_FILES, MAX_JSON_BYTES, memberPath, parseConfigDump, parseDeletedFiles, peekCheckpointImage,
  unpackCheckpointArchive,
} from '../../../oci/runtime/checkpoint-restore.js';
import { checkArchiveNamespace, restoreArchivePath } from '../../../pod/container-restore.js';
import { tarball } from '../../support/test-images.js';

const W = 'test archive';
const invalid = (re: RegExp) => (err: unknown) => err instanceof InvalidArgument && re.test(err.message);

describe('archive entries', () => {
  it('names stay inside: absolute paths and ".." are refused, "./" and empty parts dropped', () => {
    assert.deepEqual(memberPath('./checkpoint//pages-1.img', W), ['checkpoint', 'pages-1.img']);
    assert.throws(() => memberPath('/etc/passwd', W), invalid(/absolute/));
    assert.throws(() => memberPath('checkpoint/../../etc/passwd', W), invalid(/leaves/));
  });
  it('takes CRIU\'s images and the three members a restore reads; skips the rest unread', () => {
    assert.equal(archiveEntryAction('checkpoint/', 'directory', W), 'take');
    assert.equal(archiveEntryAction('checkpoint/inventory.img', 'file', W), 'take');
    for (const m of ['config.dump', 'rootfs-diff.tar', 'deleted.files']) assert.equal(archiveEntryAction(m, 'file', W), 'take');
    for (const m of ['spec.dump', 'bind.mounts', 'dump.log', 'stats-dump', 'other/thing']) assert.equal(archiveEntryAction(m, 'file', W), 'skip');
  });
  it('refuses links, devices and nested image dirs', () => {
    assert.throws(() => archiveEntryAction('checkpoint/pages-1.img', 'symlink', W), invalid(/symlink.*only files and directories/));
    assert.throws(() => archiveEntryAction('config.dump', 'link', W), invalid(/link/));
    assert.throws(() => archiveEntryAction('dev', 'character-device', W), invalid(/character-device/));
    assert.throws(() => archiveEntryAction('checkpoint/sub/x.img', 'file', W), invalid(/not one of CRIU's images/));
  });
});

describe('config.dump and deleted.files', () => {
  it('config.dump names the image by id or name, and the pod it was taken in', () => {
    assert.deepEqual(parseConfigDump('{"rootfsImageRef":"sha256:ab","rootfsImage":"r/b:1","name":"c","spec":{"x":1}}', W),
      { rootfsImageRef: 'sha256:ab', rootfsImage: 'r/b:1', name: 'c', podNamespace: '', podName: '' });
    assert.deepEqual(parseConfigDump('{"rootfsImage":"r/b:1","podNamespace":"shop","podName":"web","podUid":"u"}', W),
      { rootfsImageRef: '', rootfsImage: 'r/b:1', name: '', podNamespace: 'shop', podName: 'web' });
    assert.throws(() => parseConfigDump('{"name":"c"}', W), invalid(/names no image/));
    assert.throws(() => parseConfigDump('nope', W), invalid(/not JSON/));
  });
  it('deleted.files is a list of absolute paths', () => {
    assert.deepEqual(parseDeletedFiles('["/etc/group","/tmp/x"]', W), ['/etc/group', '/tmp/x']);
    assert.throws(() => parseDeletedFiles('["etc/group"]', W), invalid(/absolute paths/));
    assert.throws(() => parseDeletedFiles('{"a":1}', W), invalid(/absolute paths/));
  });
  it('deleted.files lists at most MAX_DELETED_FILES paths', () => {
    const list = (n: number) => JSON.stringify(Array.from({ length: n }, (_, i) => `/f${i}`));
    assert.equal(parseDeletedFiles(list(MAX_DELETED_FILES), W).length, MAX_DELETED_FILES);
    assert.throws(() => parseDeletedFiles(list(MAX_DELETED_FILES + 1), W), invalid(/lists 100001 paths, more than the 100000 a restore applies/));
  });
});

describe('reading archives', () => {
  let dir: string;
  before(async () => { dir = await mkdtemp(join(tmpdir(), 'minicri-restore-unit-')); });
  after(() => rm(dir, { recursive: true, force: true }));
  const configDump = { name: 'config.dump', data: '{"rootfsImage":"r/b:1","podNamespace":"shop"}' };

  it('peeking at config.dump reads no further: a file cut short after it still names the image', async () => {
    const whole = await tarball([configDump, { name: 'checkpoint' }, { name: 'checkpoint/pages-1.img', data: Buffer.alloc(1 << 20, 1) }]);
    const path = join(dir, 'cut.tar');
    // Cut in the middle of the memory pages: reading up to there fails.
    await writeFile(path, whole.subarray(0, whole.length / 2));
    assert.deepEqual(await peekCheckpointImage(path, 1 << 30),
      { rootfsImageRef: '', rootfsImage: 'r/b:1', name: '', podNamespace: 'shop', podName: '' });
    await assert.rejects(unpackCheckpointArchive(path, join(dir, 'cut'), 1 << 30), invalid(/cannot be read as a tar archive/));
  });

  it('a deleted.files bigger than MAX_JSON_BYTES is refused before it is written out', async () => {
    const path = join(dir, 'bigdeleted.tar');
    await writeFile(path, await tarball([configDump, { name: 'checkpoint' }, { name: 'checkpoint/inventory.img', data: 'x' },
      { name: 'deleted.files', data: Buffer.alloc(MAX_JSON_BYTES + 1, 0x20) }]));
    await assert.rejects(unpackCheckpointArchive(path, join(dir, 'bigdeleted'), 1 << 30),
      invalid(/deleted\.files is 16777217 bytes, more than the 16777216 \(16 MiB\) a restore reads/));
  });
});

describe('rootfs diff entries', () => {
  it('files, dirs, symlinks and hard links; no whiteouts, devices or fifos', () => {
    assert.deepEqual(diffEntryPath('usr/bin/x', 'file', W), ['usr', 'bin', 'x']);
    assert.deepEqual(diffEntryPath('lib', 'symlink', W), ['lib']);
    assert.throws(() => diffEntryPath('etc/.wh.passwd', 'file', W), invalid(/whiteout/));
    assert.throws(() => diffEntryPath('dev/sda', 'block-device', W), invalid(/device nodes/));
    assert.throws(() => diffEntryPath('run/p', 'fifo', W), invalid(/fifo/));
    assert.throws(() => diffEntryPath('../../root/.ssh/authorized_keys', 'file', W), invalid(/leaves/));
  });
});

describe('checkArchiveNamespace', () => {
  const strict = { allow_foreign_archives: false };
  const denied = (re: RegExp) => (err: unknown) => err instanceof PermissionDenied && re.test(err.message);
  it('an archive restores into a pod of the namespace it was checkpointed in', () => {
    assert.doesNotThrow(() => checkArchiveNamespace({ podNamespace: 'shop', podName: 'web' }, 'shop', strict, '/a.tar'));
  });
  it('another namespace is refused, whatever allow_foreign_archives says', () => {
    for (const allow of [false, true]) {
      assert.throws(() => checkArchiveNamespace({ podNamespace: 'bank', podName: 'vault' }, 'shop', { allow_foreign_archives: allow }, '/a.tar'),
        denied(/namespace "bank" \(pod "vault"\).*not of "shop"/));
    }
  });
  it('an archive recording no namespace is refused unless allow_foreign_archives', () => {
    assert.throws(() => checkArchiveNamespace({ podNamespace: '', podName: '' }, 'shop', strict, '/a.tar'),
      denied(/does not record the namespace.*restore\.allow_foreign_archives/));
    assert.doesNotThrow(() => checkArchiveNamespace({ podNamespace: '', podName: '' }, 'shop', { allow_foreign_archives: true }, '/a.tar'));
  });
});

describe('restoreArchivePath', () => {
  const on = { enabled: true, archive_dir: '/var/lib/kubelet/checkpoints', max_archive_bytes: 1 << 30, allow_foreign_archives: false };
  it('an image reference is no archive', () => {
    assert.equal(restoreArchivePath('docker.io/library/busybox:1', on), undefined);
    assert.equal(restoreArchivePath('docker.io/library/busybox:1', undefined), undefined);
  });
  it('an archive in the archive dir, restores on', () => {
    assert.equal(restoreArchivePath('/var/lib/kubelet/checkpoints//c.tar', on), '/var/lib/kubelet/checkpoints/c.tar');
  });
  it('restores off (the default) refuse every archive', () => {
    assert.throws(() => restoreArchivePath('/var/lib/kubelet/checkpoints/c.tar', { ...on, enabled: false }),
      (err) => err instanceof FailedPrecondition && /restore.enabled/.test(err.message));
    assert.throws(() => restoreArchivePath('/var/lib/kubelet/checkpoints/c.tar', undefined), FailedPrecondition);
  });
  it('a path outside the archive dir is refused, ".." included', () => {
    for (const p of ['/etc/shadow', '/var/lib/kubelet/checkpoints/../pods/x.tar', '/var/lib/kubelet/checkpoints-other/c.tar', '/var/lib/kubelet/checkpoints']) {
      assert.throws(() => restoreArchivePath(p, on), invalid(/restore.archive_dir/), p);
    }
  });
});
