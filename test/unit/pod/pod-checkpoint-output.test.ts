// CheckpointPod's output directory against whoever else writes in it: a symlink is never followed, a second call
// on the same directory is refused and removes nothing, a failed call removes only what it made (not through a
// containers/ swapped for a symlink), and recovery removes nothing from a directory that is no longer the one made.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { InvalidArgument } from '../../../core/errors.js';
import {
  claimOutputDir, identityOf, reclaimOutput, releaseClaimed, removeClaimed, writeManifest,
} from '../../../pod/pod-checkpoint-output.js';

describe('CheckpointPod output directory', () => {
  let dir: string;
  let out: string;
  /** Another directory holding a file: what a swapped path would point to. */
  let victim: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'minicri-pcout-'));
    out = join(dir, 'out');
    victim = join(dir, 'victim');
    await mkdir(out);
    await mkdir(victim);
    await writeFile(join(victim, 'keep.tar'), 'keep');
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('refuses a symlink, a missing path, a file and a directory that is not empty', async () => {
    await symlink(victim, join(dir, 'link'));
    await assert.rejects(claimOutputDir(join(dir, 'link')), (e: Error) => e instanceof InvalidArgument && /is a symlink/.test(e.message));
    await assert.rejects(claimOutputDir(join(dir, 'none')), /does not exist/);
    await assert.rejects(claimOutputDir(join(victim, 'keep.tar')), /is not a directory/);
    await assert.rejects(claimOutputDir(victim), /is not empty \(keep\.tar\)/);
    assert.deepEqual(await readdir(victim), ['keep.tar']);
  });

  it('a second call on the same directory is refused and leaves the first one\'s output whole', async () => {
    const first = await claimOutputDir(out);
    await writeFile(first.containers.at('a.tar'), 'archive');
    await assert.rejects(claimOutputDir(out), (e: Error) => e instanceof InvalidArgument && /is not empty|is in use/.test(e.message));
    await writeManifest(first, '{}');
    await releaseClaimed(first);
    assert.deepEqual((await readdir(out)).sort(), ['containers', 'pod.json']);
    assert.deepEqual(await readdir(join(out, 'containers')), ['a.tar']);
  });

  it('a failed call removes what it made through the held directories, never through a swapped containers/', async () => {
    const c = await claimOutputDir(out);
    await writeFile(c.containers.at('a.tar'), 'archive');
    await rename(join(out, 'containers'), join(out, 'moved'));
    await symlink(victim, join(out, 'containers'));
    await writeFile(join(out, 'pod.json'), 'someone else\'s');
    await removeClaimed(c);
    await releaseClaimed(c);
    assert.deepEqual(await readdir(victim), ['keep.tar'], 'nothing removed through the symlink');
    assert.deepEqual(await readdir(join(out, 'moved')), [], 'the archive written went');
    assert.equal(await readFile(join(out, 'pod.json'), 'utf8'), 'someone else\'s', 'a pod.json this call did not write stays');
  });

  it('recovery removes from the directories the call made, and nothing from a path that names another one now', async () => {
    const c = await claimOutputDir(out);
    const identity = identityOf(c);
    await writeFile(c.containers.at('a.tar'), 'archive');
    await writeManifest(c, '{}');
    await releaseClaimed(c);
    const again = await reclaimOutput(out, identity, true);
    assert.ok(again, 'the same directories');
    await removeClaimed(again);
    await releaseClaimed(again);
    assert.deepEqual(await readdir(out), []);

    const d = await claimOutputDir(out);
    const made = identityOf(d);
    await releaseClaimed(d);
    await rename(out, join(dir, 'old'));
    await symlink(victim, out);
    assert.equal(await reclaimOutput(out, made, true), undefined, 'a symlink in its place');
    await rm(out);
    await mkdir(join(out, 'containers'), { recursive: true });
    assert.equal(await reclaimOutput(out, made, true), undefined, 'another directory in its place');
    await rm(join(out, 'containers'), { recursive: true });
    await rename(join(dir, 'old', 'containers'), join(dir, 'old', 'was'));
    await symlink(victim, join(dir, 'old', 'containers'));
    await rm(out, { recursive: true });
    await rename(join(dir, 'old'), out);
    assert.equal(await reclaimOutput(out, made, true), undefined, 'its containers/ swapped for a symlink');
    assert.deepEqual(await readdir(victim), ['keep.tar']);
  });
});
