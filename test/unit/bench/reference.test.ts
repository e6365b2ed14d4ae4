import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readlink, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { daemonPath } from '../../../bench/lib/env.js';
import { parseDigestTable } from '../../../bench/lib/reference.js';
import { changedPods, snapshotOf } from '../../../bench/relist.js';

describe('the reference runtime\'s digests', () => {
  it('reads each binary\'s sha256 from the README\'s table and nothing else', () => {
    const readme = [
      '| file | built from | sha256 |',
      '|---|---|---|',
      `| bin/containerd | containerd v2.1.5, \`go build\` | ${'a'.repeat(64)} |`,
      `| bin/runc | runc v1.3.6 | ${'b'.repeat(64)} |`,
      `| bin/short | x | ${'c'.repeat(63)} |`,
      `sha256 ${'d'.repeat(64)} in prose`,
    ].join('\n');
    assert.deepEqual(parseDigestTable(readme), { 'bin/containerd': 'a'.repeat(64), 'bin/runc': 'b'.repeat(64) });
  });
});

describe('the daemons\' PATH', () => {
  it('replaces a directory holding unpigz by links to everything else in it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'minicri-bench-path-'));
    try {
      const bin = join(dir, 'bin');
      const other = join(dir, 'other');
      await mkdir(bin);
      await mkdir(other);
      await writeFile(join(bin, 'unpigz'), '');
      await writeFile(join(bin, 'tar'), '');
      const { path, replaced } = await daemonPath(join(dir, 'links'), `${other}:${bin}`);
      assert.deepEqual(replaced, [bin]);
      const [first, second] = path.split(':');
      assert.equal(first, other);
      assert.deepEqual(await readdir(second!), ['tar']);
      assert.equal(await readlink(join(second!, 'tar')), join(bin, 'tar'));
      assert.deepEqual(await daemonPath(join(dir, 'links2'), other), { path: other, replaced: [] });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('kubelet\'s changed pods after a relist', () => {
  const pods = (...ids: string[]) => ids.map((id) => ({ id, state: 'SANDBOX_READY' }));
  const ctr = (id: string, pod: string, state = 'CONTAINER_RUNNING') => ({ id, pod_sandbox_id: pod, state });

  it('takes every pod as changed on the first relist', () => {
    assert.deepEqual(changedPods(undefined, snapshotOf(pods('a', 'b'), [ctr('c1', 'a')])).sort(), ['a', 'b']);
  });

  it('takes pods whose sandbox or a container changed state, appeared or went away, and no others', () => {
    const before = snapshotOf(pods('a', 'b', 'c', 'd'), [ctr('ca', 'a'), ctr('cb', 'b'), ctr('cc', 'c'), ctr('cd', 'd')]);
    const after = snapshotOf(
      [...pods('a', 'b', 'c'), { id: 'd', state: 'SANDBOX_NOTREADY' }, ...pods('e')],
      [ctr('ca', 'a'), ctr('cb', 'b', 'CONTAINER_EXITED'), ctr('cd', 'd'), ctr('ce', 'e')],
    );
    assert.deepEqual(changedPods(before, after).sort(), ['b', 'c', 'd', 'e']);
    assert.deepEqual(changedPods(after, after), []);
  });

  it('leaves out a pod that is no longer listed', () => {
    const before = snapshotOf(pods('a'), [ctr('ca', 'a')]);
    assert.deepEqual(changedPods(before, snapshotOf([], [])), []);
  });
});
