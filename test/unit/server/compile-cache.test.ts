// The compile cache directory is used only when root alone can have put code in it (server/compile-cache.ts).
import assert from 'node:assert/strict';
import { chmod, chown, lstat, mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { execa } from 'execa';
import { distrust, prepareCompileCacheDir, type DirFacts } from '../../../server/compile-cache.js';

/** The command, run as itself, so its first line's environment and flags apply. */
const MAIN = fileURLToPath(new URL('../../../server/main.js', import.meta.url));

const facts = (o: { uid?: number; mode?: number; dir?: boolean; link?: boolean }): DirFacts =>
  ({ uid: o.uid ?? 0, mode: o.mode ?? 0o40755, isDirectory: () => o.dir ?? true, isSymbolicLink: () => o.link ?? false });

describe('the compile cache directory', () => {
  it('trusts a root directory only root can write to, nothing else', () => {
    assert.equal(distrust('/c', facts({})), undefined);
    assert.equal(distrust('/c', facts({ mode: 0o41700 })), undefined); // sticky and 0700: still root's alone
    assert.match(distrust('/c', facts({ link: true, dir: false }))!, /\/c is a symbolic link/);
    assert.match(distrust('/c', facts({ dir: false }))!, /not a directory/);
    assert.match(distrust('/c', facts({ uid: 1000 }))!, /uid 1000, not root/);
    assert.match(distrust('/c', facts({ mode: 0o40775 }))!, /writable by its group or others \(mode 775\)/);
    assert.match(distrust('/c', facts({ mode: 0o41777 }))!, /mode 1777/);
  });

  describe('on disk', { skip: process.getuid?.() !== 0 && 'root owns the directories it trusts: run as root' }, () => {
    let base: string;
    before(async () => { base = await mkdtemp(join(tmpdir(), 'minicri-ccache-')); });
    after(() => rm(base, { recursive: true, force: true }));

    it('makes the missing directories 0700 and leaves the last one 0700', async () => {
      await mkdir(join(base, 'a'), { mode: 0o755 });
      await chmod(join(base, 'a'), 0o755);
      assert.equal(prepareCompileCacheDir(base, 'a', 'b', 'c'), undefined);
      assert.equal((await lstat(join(base, 'a'))).mode & 0o777, 0o755);
      assert.equal((await lstat(join(base, 'a', 'b'))).mode & 0o777, 0o700);
      assert.equal((await lstat(join(base, 'a', 'b', 'c'))).mode & 0o777, 0o700);
      await chmod(join(base, 'a', 'b', 'c'), 0o755);
      assert.equal(prepareCompileCacheDir(base, 'a', 'b', 'c'), undefined);
      assert.equal((await lstat(join(base, 'a', 'b', 'c'))).mode & 0o777, 0o700);
    });

    it('refuses a symbolic link, a directory of another user or one others can write, and makes nothing below it', async () => {
      await mkdir(join(base, 'elsewhere'), { mode: 0o700 });
      await symlink(join(base, 'elsewhere'), join(base, 'link'));
      assert.match(prepareCompileCacheDir(base, 'link', 'compile')!, /link is a symbolic link/);
      assert.equal(existsSync(join(base, 'elsewhere', 'compile')), false);

      await mkdir(join(base, 'theirs'), { mode: 0o700 });
      await chown(join(base, 'theirs'), 65534, 65534);
      assert.match(prepareCompileCacheDir(base, 'theirs', 'compile')!, /theirs belongs to uid 65534/);
      assert.equal(existsSync(join(base, 'theirs', 'compile')), false);

      await mkdir(join(base, 'open', 'compile'), { recursive: true, mode: 0o700 });
      await chmod(join(base, 'open', 'compile'), 0o777);
      assert.match(prepareCompileCacheDir(base, 'open', 'compile')!, /open\/compile is writable by its group or others/);
      assert.equal((await lstat(join(base, 'open', 'compile'))).mode & 0o777, 0o777, 'made trusted by a chmod');
    });
  });

  it('is never one NODE_COMPILE_CACHE names: the command drops it before Node starts', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'minicri-env-ccache-'));
    try {
      const named = join(dir, 'cache');
      const run = await execa(MAIN, ['--no-such-option'], { env: { NODE_COMPILE_CACHE: named }, reject: false });
      assert.match(run.stderr, /no-such-option/, 'the command ran and refused the option');
      assert.equal(existsSync(named), false);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
