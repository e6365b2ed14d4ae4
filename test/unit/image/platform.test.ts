import assert from 'node:assert/strict';
import { test } from 'node:test';
import { selectPlatform } from '../../../oci/image/platform.js';

const p = (architecture: string, variant?: string, os = 'linux') => ({ platform: { os, architecture, variant } });

test('picks linux/amd64 and skips other platforms and attestations', () => {
  assert.equal(selectPlatform([p('arm64'), p('amd64', undefined, 'windows'), p('amd64'), p('unknown', undefined, 'unknown')]), 2);
  assert.equal(selectPlatform([p('arm64'), p('s390x')]), -1);
  assert.equal(selectPlatform([{}, p('amd64')]), 1);
  assert.equal(selectPlatform([p('x86_64')]), 0, 'alias');
});

test('variants: a host level runs its level and below, best first', () => {
  assert.equal(selectPlatform([p('amd64', 'v3'), p('amd64', 'v2')]), -1, 'default amd64 host is v1');
  assert.equal(selectPlatform([p('amd64', 'v3'), p('amd64')]), 1);
  assert.equal(selectPlatform([p('amd64', 'v1'), p('amd64', 'v3'), p('amd64', 'v2')], { os: 'linux', architecture: 'amd64', variant: 'v3' }), 1);
  assert.equal(selectPlatform([p('amd64', 'v4'), p('amd64', 'v2')], { os: 'linux', architecture: 'amd64', variant: 'v3' }), 1);
  assert.equal(selectPlatform([p('arm64', 'v8')], { os: 'linux', architecture: 'arm64' }), 0, 'arm64 "" equals v8');
  assert.equal(selectPlatform([p('arm64')], { os: 'linux', architecture: 'aarch64', variant: 'v8' }), 0);
  assert.equal(selectPlatform([p('arm', 'v5'), p('arm', 'v6'), p('arm', 'v8')], { os: 'linux', architecture: 'arm', variant: 'v7' }), 1);
  assert.equal(selectPlatform([p('arm', 'v7'), p('arm')], { os: 'linux', architecture: 'arm', variant: 'v7' }), 0, 'first among equals');
});

test('the host platform follows process.arch in OCI names, with the variant for arm', async () => {
  const { hostPlatform, runsOn, HOST_PLATFORM } = await import('../../../oci/image/platform.js');
  assert.deepEqual(hostPlatform('x64'), { os: 'linux', architecture: 'amd64' });
  assert.deepEqual(hostPlatform('arm64'), { os: 'linux', architecture: 'arm64', variant: 'v8' });
  assert.deepEqual(hostPlatform('arm', '6'), { os: 'linux', architecture: 'arm', variant: 'v6' });
  assert.deepEqual(hostPlatform('arm', undefined), { os: 'linux', architecture: 'arm', variant: 'v7' });
  assert.deepEqual(hostPlatform('ppc64'), { os: 'linux', architecture: 'ppc64le' });
  assert.deepEqual(hostPlatform('s390x'), { os: 'linux', architecture: 's390x' });
  assert.deepEqual(hostPlatform('ia32'), { os: 'linux', architecture: '386' });
  assert.equal(HOST_PLATFORM.architecture, hostPlatform(process.arch).architecture);
  const amd = { os: 'linux', architecture: 'amd64' };
  assert.equal(runsOn({ os: 'linux', architecture: 'amd64' }, amd), true);
  assert.equal(runsOn({ os: 'linux', architecture: 'x86_64', variant: 'v3' }, amd), true, 'amd64 levels are not held');
  assert.equal(runsOn({ os: 'linux', architecture: 'arm64' }, amd), false);
  assert.equal(runsOn({ os: '', architecture: '' }, amd), true, 'an image that names no architecture');
  const arm7 = hostPlatform('arm', '7');
  assert.equal(runsOn({ os: 'linux', architecture: 'arm', variant: 'v6' }, arm7), true);
  assert.equal(runsOn({ os: 'linux', architecture: 'arm', variant: 'v8' }, arm7), false);
  assert.equal(runsOn({ os: 'linux', architecture: 'arm64', variant: 'v8' }, hostPlatform('arm64')), true);
});
