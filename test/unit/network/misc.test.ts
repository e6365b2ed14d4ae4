import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseCacheEntry, ResultCache } from '../../../cni/cache.js';
import { parseCniError, pluginEnv } from '../../../cni/exec.js';
import { compareVersions, versionAtLeast } from '../../../cni/version.js';
import { netnsPinName, netnsSymlinkName } from '../../../netns/names.js';

test('plugin env: CNI variables set, inherited CNI_* dropped, rest kept', () => {
  const env = pluginEnv(
    { command: 'DEL', pluginType: 'bridge', network: 'n', containerId: 'c1', netns: '', ifName: 'eth0', args: 'A=1', stdin: Buffer.alloc(0) },
    ['/a', '/b'],
    { PATH: '/usr/bin', CNI_NETNS: '/stale', CNI_FOO: 'x' },
  );
  assert.deepEqual(env, { PATH: '/usr/bin', CNI_COMMAND: 'DEL', CNI_PATH: '/a:/b', CNI_CONTAINERID: 'c1', CNI_NETNS: '', CNI_IFNAME: 'eth0', CNI_ARGS: 'A=1' });
  const status = pluginEnv({ command: 'STATUS', pluginType: 'x', network: 'n', stdin: Buffer.alloc(0) }, ['/a'], {});
  assert.deepEqual(status, { CNI_COMMAND: 'STATUS', CNI_PATH: '/a' });
});

test('CNI error JSON is recognised', () => {
  assert.deepEqual(parseCniError('{"cniVersion":"1.0.0","code":7,"msg":"bad","details":"why"}'), { code: 7, msg: 'bad', details: 'why' });
  assert.deepEqual(parseCniError('{"code":11,"msg":"x","details":""}'), { code: 11, msg: 'x' });
  assert.equal(parseCniError('oops'), undefined);
  assert.equal(parseCniError('{"msg":"no code"}'), undefined);
});

test('cache entries: only complete cniCacheV1 objects', () => {
  const ok = { kind: 'cniCacheV1', containerId: 'c', config: 'e30=', ifName: 'eth0', networkName: 'n' };
  assert.deepEqual(parseCacheEntry(ok), ok);
  assert.equal(parseCacheEntry({ ...ok, kind: 'other' }), undefined);
  assert.equal(parseCacheEntry({ ...ok, ifName: '' }), undefined);
  assert.equal(parseCacheEntry({ ...ok, config: 1 }), undefined);
  assert.equal(parseCacheEntry(null), undefined);
});

test('version comparison', () => {
  assert.ok(compareVersions('0.10.0', '0.4.0') > 0);
  assert.ok(versionAtLeast('1.1.0', '1.1.0'));
  assert.ok(!versionAtLeast('0.3.1', '0.4.0'));
});

test('netns names', () => {
  assert.equal(netnsPinName('ab12'), 'minicri-ab12');
  assert.equal(netnsSymlinkName('web-0', 'ab12'), 'web-0-ab12');
  assert.equal(netnsSymlinkName('../a/b c', 'ab12'), 'a-b-c-ab12');
  assert.equal(netnsSymlinkName('', 'ab12'), 'pod-ab12');
});

test('the result cache drops temp files a crash left mid-write, and nothing else', async () => {
  const root = await mkdtemp(join(tmpdir(), 'minicri-cache-'));
  try {
    const cache = new ResultCache(root);
    await mkdir(cache.dir, { recursive: true });
    await writeFile(join(cache.dir, '.tmp-0123456789ab'), '{"kind":');
    await writeFile(join(cache.dir, 'net-abc-eth0'), '{}');
    await cache.removeStaleTemps();
    assert.deepEqual(await readdir(cache.dir), ['net-abc-eth0']);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});
