import assert from 'node:assert/strict';
import { chown, lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { gzipSync } from 'node:zlib';
import { randomBytes } from 'node:crypto';
import { getAttribute } from '@napi-rs/xattr';
import { execa } from 'execa';
import { InvalidArgument } from '../../../core/errors.js';
import { unpackLayer } from '../../../oci/image/unpack.js';
import { unpackInWorker } from '../../../oci/image/unpack-pool.js';
import { unmountUnder } from '../../support/daemon.js';
import { imageEnv } from '../../support/image-env.js';
import { mountFreshExt4 } from '../../support/loop-fs.js';
import { startRegistry, type TestRegistry } from '../../support/registry.js';
import { buildImage, pushImage, tarball, type TarEntry } from '../../support/test-images.js';

async function tree(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (dir: string) => {
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      out.push(relative(root, p) + (e.isDirectory() ? '/' : ''));
      if (e.isDirectory()) await walk(p);
    }
  };
  await walk(root);
  return out.sort();
}

describe('layer unpacking and overlay root filesystems', () => {
  let reg: TestRegistry;
  let outside: string;
  before(async () => {
    reg = await startRegistry();
    outside = await mkdtemp(join(tmpdir(), 'minicri-image-outside-'));
  });
  after(async () => {
    await reg?.stop();
    await rm(outside, { recursive: true, force: true });
  });

  test('crafted entries stay inside their layer', async (t) => {
    const { images, rootDir } = await imageEnv(t);
    const entries: TarEntry[] = [
      { name: '../../../../escape-dotdot', data: 'a' },
      { name: '/escape-abs', data: 'b' },
      { name: 'etc/', type: 'directory' },
      { name: 'etc/passwd', data: 'layer passwd\n' },
      { name: 'abs', type: 'symlink', linkname: '/' },
      { name: 'abs/escape-through-abs', data: 'c' },
      { name: 'out', type: 'symlink', linkname: outside },
      { name: 'out/escape-through-outside', data: 'd' },
      { name: 'up', type: 'symlink', linkname: '../../../../../..' + outside },
      { name: 'up/escape-through-up', data: 'e' },
      { name: 'etcl', type: 'symlink', linkname: '/etc' },
      { name: 'hl-through-symlink', type: 'link', linkname: 'etcl/passwd' },
      { name: 'hl-dotdot', type: 'link', linkname: '../../../../etc/passwd' },
      { name: 'x/../../../.wh.wh-escape', data: '' },
    ];
    const img = await buildImage([{ entries }], {});
    await pushImage(reg, 'test/crafted', ['v1'], img);
    const r = await images.pull(`${reg.host}/test/crafted:v1`);
    const layer = join(rootDir, 'layers', r.layers[0]!.slice(7));
    assert.deepEqual(await readdir(outside), [], 'nothing written outside');
    assert.equal(await readFile(join(layer, 'escape-dotdot'), 'utf8'), 'a');
    assert.equal(await readFile(join(layer, 'escape-abs'), 'utf8'), 'b');
    assert.equal(await readFile(join(layer, 'escape-through-abs'), 'utf8'), 'c');
    assert.equal(await readFile(join(layer, outside.slice(1), 'escape-through-outside'), 'utf8'), 'd');
    assert.equal(await readFile(join(layer, outside.slice(1), 'escape-through-up'), 'utf8'), 'e');
    const passwd = await stat(join(layer, 'etc/passwd'));
    assert.equal((await stat(join(layer, 'hl-through-symlink'))).ino, passwd.ino);
    assert.equal((await stat(join(layer, 'hl-dotdot'))).ino, passwd.ino);
    assert.equal(await readlink(join(layer, 'out')), outside, 'symlinks themselves are kept verbatim');
    assert.ok((await lstat(join(layer, 'wh-escape'))).isCharacterDevice(), 'whiteout confined too');
    assert.notEqual(await readFile('/etc/passwd', 'utf8'), 'layer passwd\n');
  });

  test('a hardlink to a file outside the layer fails the pull and leaves nothing', async (t) => {
    const { images, rootDir } = await imageEnv(t);
    const img = await buildImage([{ entries: [{ name: 'hl', type: 'link', linkname: '/etc/hostname' }] }], {});
    await pushImage(reg, 'test/hardlink-out', ['v1'], img);
    await assert.rejects(images.pull(`${reg.host}/test/hardlink-out:v1`), /does not name a file earlier in the layer/);
    assert.deepEqual(await readdir(join(rootDir, 'layers')), []);
    assert.deepEqual(await readdir(join(rootDir, 'tmp')), []);
    assert.deepEqual(await readdir(join(rootDir, 'blobs', 'sha256')), []);
  });

  test('broken gzip, zstd and tar data fail the pull cleanly', async (t) => {
    const { images, rootDir } = await imageEnv(t);
    const tarData = await tarball([{ name: 'f', data: 'x'.repeat(5000) }]);
    const gz = gzipSync(tarData);
    const zst = (await execa('zstd', ['-c', '-q'], { input: tarData, encoding: 'buffer' })).stdout as Buffer;
    const broken: Array<[string, Buffer, 'gzip' | 'zstd' | 'none']> = [
      ['gzip', gz.subarray(0, gz.length - 20), 'gzip'],
      ['zstd', Buffer.concat([zst.subarray(0, 12), Buffer.alloc(30, 7)]), 'zstd'],
      ['tar', tarData.subarray(0, 700), 'none'],
    ];
    for (const [kind, blob, compression] of broken) {
      const img = await buildImage([{ entries: [], blob, compression }], {});
      await pushImage(reg, `test/broken-${kind}`, ['v1'], img);
      await assert.rejects(images.pull(`${reg.host}/test/broken-${kind}:v1`), (e: Error) => e instanceof InvalidArgument && e.message.includes('cannot be unpacked'), kind);
    }
    assert.deepEqual(await readdir(join(rootDir, 'layers')), []);
    assert.deepEqual(await readdir(join(rootDir, 'tmp')), []);
  });

  test('a worker unpacks a layer as the main thread does, however its bytes are cut: padding, junk and a second member after the first', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'minicri-unpack-threads-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const first = gzipSync(await tarball([{ name: 'a', data: randomBytes(3 << 20) }, { name: 'b', data: 'small file\n' }]));
    const second = gzipSync(await tarball([{ name: 'c', data: 'from another member\n' }]));
    const cases: Array<{ what: string; pieces: Buffer[] }> = [
      { what: 'zeros, then junk in its own piece', pieces: [first, Buffer.alloc(512), Buffer.from('garbage')] },
      { what: 'zeros with the member, then junk', pieces: [Buffer.concat([first, Buffer.alloc(512)]), Buffer.from('garbage')] },
      { what: 'zeros, then a second member', pieces: [Buffer.concat([first, Buffer.alloc(512)]), second] },
      { what: 'all in one piece', pieces: [Buffer.concat([first, Buffer.alloc(512), second])] },
    ];
    let n = 0;
    for (const c of cases) {
      const main = await unpackLayer(Readable.from(c.pieces.map((p) => Buffer.from(p))), join(dir, `main${n}`), c.what);
      const worker = await unpackInWorker(Readable.from(c.pieces.map((p) => Buffer.from(p))), join(dir, `worker${n}`), c.what);
      assert.deepEqual(worker, main, c.what);
      assert.deepEqual(await tree(join(dir, `worker${n}`)), ['a', 'b'], c.what);
      assert.deepEqual(await readFile(join(dir, `worker${n}`, 'a')), await readFile(join(dir, `main${n}`, 'a')), c.what);
      n++;
    }
  });

  test('whiteouts and opaque directories: the overlay shows exactly what the image means', async (t) => {
    const { images } = await imageEnv(t);
    const img = await buildImage([
      { entries: [
        { name: 'a/', type: 'directory' }, { name: 'a/keep', data: '1' }, { name: 'a/gone', data: '2' },
        { name: 'opq/', type: 'directory' }, { name: 'opq/old1', data: '3' }, { name: 'opq/sub/', type: 'directory' }, { name: 'opq/sub/old2', data: '4' },
        { name: 'file1', data: '5' }, { name: 'dir1/', type: 'directory' }, { name: 'dir1/x', data: '6' },
      ] },
      { entries: [
        { name: 'a/.wh.gone', data: '' }, { name: 'opq/', type: 'directory' }, { name: 'opq/.wh..wh..opq', data: '' }, { name: 'opq/new', data: '7' },
        { name: '.wh.file1', data: '' }, { name: '.wh.dir1', data: '' }, { name: 'newdir/x', data: '8' },
      ], compression: 'none' },
      { entries: [{ name: 'file1', data: 'back' }] },
    ], {});
    await pushImage(reg, 'test/whiteout', ['v1'], img);
    const r = await images.pull(`${reg.host}/test/whiteout:v1`);
    const fs = await images.prepareRootfs('whiteout-1', r.id);
    t.after(() => images.removeRootfs('whiteout-1'));
    assert.deepEqual(await tree(fs.path), ['a/', 'a/keep', 'file1', 'newdir/', 'newdir/x', 'opq/', 'opq/new']);
    assert.equal(await readFile(join(fs.path, 'file1'), 'utf8'), 'back');
    assert.ok(fs.mounted);
    assert.deepEqual((await images.listRootfs()).map((x) => [x.key, x.imageId, x.mounted]), [['whiteout-1', r.id, true]]);
    // Writes go to the container's own upper dir, not the shared layers.
    const again = await images.prepareRootfs('whiteout-1', r.id);
    assert.equal(again.path, fs.path, 'prepare is idempotent for the same image');
    await images.removeRootfs('whiteout-1');
    assert.deepEqual(await images.listRootfs(), []);
  });

  test('ownership, modes, mtimes, xattrs, devices and fifos are kept', async (t) => {
    const { images, rootDir } = await imageEnv(t);
    const mtime = new Date('2021-02-03T04:05:06Z');
    const img = await buildImage([{ entries: [
      { name: 'd/', type: 'directory', mode: 0o750, uid: 7, gid: 8, mtime },
      { name: 'd/suid', data: '#!/bin/sh\n', mode: 0o4755, uid: 1234, gid: 5678, mtime },
      { name: 'd/attr', data: 'x', pax: { 'SCHILY.xattr.user.minicri': 'yes', 'SCHILY.xattr.trusted.overlay.opaque': 'y' } },
      { name: 'd/null', type: 'character-device', devmajor: 1, devminor: 3, mode: 0o666 },
      { name: 'd/fifo', type: 'fifo', mode: 0o600 },
      { name: 'd/link', type: 'symlink', linkname: 'suid', uid: 3, gid: 4 },
    ] }], {});
    await pushImage(reg, 'test/meta', ['v1'], img);
    const r = await images.pull(`${reg.host}/test/meta:v1`);
    const d = join(rootDir, 'layers', r.layers[0]!.slice(7), 'd');
    const sd = await lstat(d);
    assert.equal(sd.mode & 0o7777, 0o750);
    assert.deepEqual([sd.uid, sd.gid, sd.mtime.getTime()], [7, 8, mtime.getTime()]);
    const s = await lstat(join(d, 'suid'));
    assert.equal(s.mode & 0o7777, 0o4755);
    assert.deepEqual([s.uid, s.gid, s.mtime.getTime()], [1234, 5678, mtime.getTime()]);
    assert.equal(String(await getAttribute(join(d, 'attr'), 'user.minicri')), 'yes');
    assert.equal(await getAttribute(join(d, 'attr'), 'trusted.overlay.opaque'), null, 'trusted.* from an image is dropped');
    const n = await lstat(join(d, 'null'));
    assert.ok(n.isCharacterDevice());
    assert.equal(n.rdev, (1 << 8) | 3);
    assert.ok((await lstat(join(d, 'fifo'))).isFIFO());
    const l = await lstat(join(d, 'link'));
    assert.deepEqual([l.isSymbolicLink(), l.uid, l.gid], [true, 3, 4]);
  });

  test('owners and modes hold where entries skip chown and chmod: setgid directories, loose modes, repeated paths', async (t) => {
    const { images, rootDir } = await imageEnv(t);
    const img = await buildImage([{ entries: [
      { name: 'plain', data: 'p', mode: 0o640 },
      { name: 'loose', data: 'l', mode: 0o777 },
      { name: 'g/', type: 'directory', mode: 0o2775, uid: 0, gid: 99 },
      { name: 'g/f', data: 'f', mode: 0o644 },
      { name: 'g/sub/', type: 'directory', mode: 0o755 },
      { name: 'dup', data: 'first', mode: 0o600, uid: 5, gid: 6 },
      { name: 'dup', data: 'second', mode: 0o644 },
      { name: 'became-dir', data: 'x' },
      { name: 'became-dir/', type: 'directory', mode: 0o711 },
      { name: 'again/', type: 'directory', mode: 0o700, uid: 9, gid: 9 },
      { name: 'again/', type: 'directory', mode: 0o755 },
      { name: 'ln', type: 'symlink', linkname: 'plain' },
      { name: 'ln', type: 'symlink', linkname: 'dup' },
    ] }], {});
    await pushImage(reg, 'test/owners', ['v1'], img);
    const r = await images.pull(`${reg.host}/test/owners:v1`);
    const l = join(rootDir, 'layers', r.layers[0]!.slice(7));
    const ids = async (p: string) => {
      const s = await lstat(join(l, p));
      return [s.mode & 0o7777, s.uid, s.gid];
    };
    assert.deepEqual(await ids('plain'), [0o640, 0, 0]);
    assert.deepEqual(await ids('loose'), [0o777, 0, 0], 'a mode the umask would cut is set in full');
    assert.deepEqual(await ids('g'), [0o2775, 0, 99]);
    assert.deepEqual(await ids('g/f'), [0o644, 0, 0], 'not the setgid directory\'s group');
    assert.deepEqual(await ids('g/sub'), [0o755, 0, 0], 'neither the group nor the setgid bit of its parent');
    assert.deepEqual(await ids('dup'), [0o644, 0, 0]);
    assert.equal(await readFile(join(l, 'dup'), 'utf8'), 'second');
    assert.ok((await lstat(join(l, 'became-dir'))).isDirectory());
    assert.deepEqual(await ids('became-dir'), [0o711, 0, 0]);
    assert.deepEqual(await ids('again'), [0o755, 0, 0]);
    assert.equal(await readlink(join(l, 'ln')), 'dup');
  });

  test('entries keep their own group on a filesystem mounted grpid, where new ones take their directory\'s', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'minicri-grpid-'));
    const fs = join(dir, 'fs');
    t.after(async () => {
      await unmountUnder(fs);
      await rm(dir, { recursive: true, force: true });
    });
    await mkdir(fs);
    await mountFreshExt4(fs, join(dir, 'fs.img'), '32M', ['grpid']);
    const layers = join(fs, 'layers');
    await mkdir(layers);
    await chown(layers, 0, 77); // no setgid bit: only the mount makes new entries take this group
    const l = join(layers, 'l');
    await unpackLayer(Readable.from(await tarball([
      { name: 'f', data: 'f' },
      { name: 'd/', type: 'directory' },
      { name: 'd/f', data: 'f' },
      { name: 'g/', type: 'directory', gid: 88 },
      { name: 'g/f', data: 'f' },
    ])), l, 'test layer');
    const ids = async (p: string) => {
      const st = await lstat(join(l, p));
      return [st.mode & 0o7777, st.uid, st.gid];
    };
    assert.deepEqual(await ids('f'), [0o644, 0, 0]);
    assert.deepEqual(await ids('d'), [0o755, 0, 0]);
    assert.deepEqual(await ids('d/f'), [0o644, 0, 0]);
    assert.deepEqual(await ids('g'), [0o755, 0, 88]);
    assert.deepEqual(await ids('g/f'), [0o644, 0, 0], 'not its directory\'s group');
    assert.deepEqual((await readdir(l)).sort(), ['d', 'f', 'g'], 'the probe is gone');
  });

  test('an image repeating a layer mounts', async (t) => {
    const { images } = await imageEnv(t);
    const empty = { entries: [] };
    const img = await buildImage([empty, { entries: [{ name: 'a', data: '1' }] }, empty, { entries: [{ name: 'b', data: '2' }] }, empty], {});
    await pushImage(reg, 'test/repeat', ['v1'], img);
    const r = await images.pull(`${reg.host}/test/repeat:v1`);
    assert.equal(new Set(r.layers).size, 3);
    const fs = await images.prepareRootfs('repeat-layers', r.id);
    t.after(() => images.removeRootfs('repeat-layers'));
    assert.deepEqual((await readdir(fs.path)).sort(), ['a', 'b']);
  });

  test('an image with many layers mounts', async (t) => {
    const { images } = await imageEnv(t);
    const layers = Array.from({ length: 120 }, (_, i) => ({ entries: [{ name: `f${i}`, data: String(i) }], compression: 'none' as const }));
    const img = await buildImage(layers, {});
    await pushImage(reg, 'test/many', ['v1'], img);
    const r = await images.pull(`${reg.host}/test/many:v1`);
    const fs = await images.prepareRootfs('many-layers', r.id);
    t.after(() => images.removeRootfs('many-layers'));
    assert.equal((await readdir(fs.path)).length, 120);
  });
});
