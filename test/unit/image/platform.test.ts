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
