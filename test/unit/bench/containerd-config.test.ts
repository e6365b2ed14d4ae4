// The bench's containerd configs keep everything a containerd makes under the dir its stop unmounts and removes:
// pods' netns pinned in /var/run/netns were left on the host when a stop could not drain the pods first (an
// interrupted restart bench left 27).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parse } from 'smol-toml';
import type { BenchEnv } from '../../../bench/lib/env.js';
import { containerd16Config, containerd21Config } from '../../../bench/lib/targets.js';

const env = {
  pause: 'registry.test/pause:3', busybox: 'registry.test/busybox:1', confDir: '/b/net.d',
  registry: { host: '127.0.0.1:5000' }, reference: { runc: '/b/ref/bin/runc' },
} as unknown as BenchEnv;

type Table = Record<string, unknown>;
const at = (doc: Table, path: string[]): Table => path.reduce((t, k) => t[k] as Table, doc);

test('containerd 2.1 and 1.6 pin pods\' netns under their state dir, inside the dir the bench removes', () => {
  const v21 = parse(containerd21Config(env, '/b/containerd', '/b/containerd/c.sock')) as Table;
  assert.equal(at(v21, ['plugins', 'io.containerd.cri.v1.runtime']).netns_mounts_under_state_dir, true);
  assert.equal(v21.state, '/b/containerd/state');
  const v16 = parse(containerd16Config(env, '/b/containerd16', '/b/containerd16/c.sock')) as Table;
  assert.equal(at(v16, ['plugins', 'io.containerd.grpc.v1.cri']).netns_mounts_under_state_dir, true);
  assert.equal(v16.state, '/b/containerd16/state');
});
