import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { InvalidArgument } from '../../../core/errors.js';
import { dirInRoot } from '../../../oci/image/dir-in-root.js';

const WHAT = 'layer test';

describe('dirInRoot', () => {
  let root: string;
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'dir-in-root-'));
    mkdirSync(join(root, 'usr/lib'), { recursive: true });
    symlinkSync('/usr', join(root, 'abs'));
    symlinkSync('../../../../usr', join(root, 'climb'));
    symlinkSync('loop-b', join(root, 'loop-a'));
    symlinkSync('loop-a', join(root, 'loop-b'));
    writeFileSync(join(root, 'file'), '');
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it('follows links as the root\'s own, never above it', () => {
    assert.equal(dirInRoot(root, ['abs', 'lib'], WHAT, false), join(root, 'usr/lib'));
    assert.equal(dirInRoot(root, ['climb', 'lib'], WHAT, false), join(root, 'usr/lib'));
    assert.equal(dirInRoot(root, [], WHAT, false), root);
  });

  it('makes missing directories only when asked to', () => {
    assert.equal(dirInRoot(root, ['abs', 'share', 'doc'], WHAT, false), undefined);
    assert.equal(existsSync(join(root, 'usr/share')), false);
    assert.equal(dirInRoot(root, ['abs', 'share', 'doc'], WHAT, true), join(root, 'usr/share/doc'));
    assert.equal(existsSync(join(root, 'usr/share/doc')), true);
  });

  it('refuses a file in the way and a symlink loop', () => {
    assert.throws(() => dirInRoot(root, ['file', 'x'], WHAT, true), (err: Error) =>
      err instanceof InvalidArgument && err.message === `${WHAT}: "file" is not a directory but has entries under it`);
    assert.throws(() => dirInRoot(root, ['loop-a', 'x'], WHAT, true), (err: Error) =>
      err instanceof InvalidArgument && err.message === `${WHAT}: too many symlinks resolving "loop-a/x"`);
  });

  it('takes known directories without a lookup and records the real ones it finds', () => {
    const known = new Set([join(root, 'ghost')]);
    assert.equal(dirInRoot(root, ['ghost'], WHAT, false, known), join(root, 'ghost'));
    assert.equal(dirInRoot(root, ['abs', 'lib'], WHAT, false, known), join(root, 'usr/lib'));
    assert.deepEqual([...known].sort(), [join(root, 'ghost'), join(root, 'usr'), join(root, 'usr/lib')]);
  });
});
