import assert from 'node:assert/strict';
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { exists } from '../../../core/fs.js';
import { sleep } from '../../../core/time.js';

test('exists: a file or directory is there, a missing path and a dangling link are not', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'minicri-exists-'));
  try {
    await symlink(join(dir, 'nowhere'), join(dir, 'dangling'));
    assert.equal(await exists(dir), true);
    assert.equal(await exists(join(dir, 'missing')), false);
    assert.equal(await exists(join(dir, 'dangling')), false);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('sleep resolves, and rejects with the reason when its signal aborts', async () => {
  assert.equal(await sleep(1, { unref: true }), undefined);
  const ctl = new AbortController();
  const waiting = sleep(60_000, { signal: ctl.signal });
  ctl.abort(new Error('gone'));
  await assert.rejects(waiting, /gone/);
});
