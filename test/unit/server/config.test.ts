import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig, parseConfig, runtimeRoot } from '../../../server/config.js';

describe('config', () => {
  it('has the documented defaults', () => {
    const c = parseConfig({});
    assert.equal(c.socket, '/run/minicri/minicri.sock');
    assert.equal(c.root_dir, '/var/lib/minicri');
    assert.equal(c.state_dir, '/run/minicri');
    assert.equal(c.cni.conf_dir, '/etc/cni/net.d');
    assert.deepEqual(c.cni.bin_dirs, ['/opt/cni/bin', '/usr/lib/cni']);
    assert.equal(c.cgroup_driver, 'cgroupfs');
    assert.equal(c.default_runtime, 'runc');
    assert.equal(c.streaming.address, '127.0.0.1');
    assert.equal(runtimeRoot(c, 'runc'), '/run/minicri/runc/runc');
    assert.deepEqual([c.registries.auth_file, c.registries.certs_dir, c.registries.stall_timeout_seconds, c.registries.progress_interval_seconds],
      ['/etc/minicri/auth.json', '/etc/minicri/certs.d', 60, 10]);
    const r = c.registries;
    assert.deepEqual(
      [r.max_response_bytes, r.max_manifest_bytes, r.max_config_bytes, r.max_layers, r.token_cache_entries, r.token_cache_max_seconds],
      [1 << 20, 4 << 20, 8 << 20, 200, 1000, 3600], 'the registry limits the README documents');
    assert.equal(c.writable_layer_usage_max_age_seconds, 10, 'a writable layer\'s usage is at most 10 s old');
    assert.equal(c.keep_layer_blobs, false, 'pulled layers are kept unpacked only, as the README says');
    assert.equal(c.warm_up_pulls, true, 'the pull path is warmed up at start and its workers kept, as the README says');
    assert.equal(c.registries.max_concurrent_downloads, 4, 'four layers at a time, as the README says');
    assert.throws(() => parseConfig({ registries: { max_concurrent_downloads: 0 } }), /config key "registries\.max_concurrent_downloads"/);
    assert.equal(c.userns_refuse_host_id_overlap, false, 'a user namespace mapped below 65536 is warned about, not refused');
    assert.equal(parseConfig({ userns_refuse_host_id_overlap: true }).userns_refuse_host_id_overlap, true);
  });

  it('has CRIU from PATH and restores off by default, archives from kubelet\'s checkpoint directory', () => {
    const c = parseConfig({});
    assert.equal(c.criu_path, 'criu');
    assert.deepEqual(c.restore, { enabled: false, archive_dir: '/var/lib/kubelet/checkpoints', max_archive_bytes: 16 * 1024 ** 3, allow_foreign_archives: false });
    assert.deepEqual(parseConfig({ restore: { enabled: true } }).restore.enabled, true);
    assert.throws(() => parseConfig({ restore: { archive_dir: 'checkpoints' } }), /config key "restore\.archive_dir": must be an absolute path/);
    assert.throws(() => parseConfig({ restore: { max_archive_bytes: 0 } }), /config key "restore\.max_archive_bytes"/);
    assert.throws(() => parseConfig({ criu_path: '' }), /config key "criu_path"/);
  });

  it('names unknown keys, nested ones included', () => {
    assert.throws(() => parseConfig({ sockett: '/x' }), /unknown config key "sockett"/);
    assert.throws(() => parseConfig({ registries: { mirrorz: {} } }), /unknown config key "registries\.mirrorz"/);
  });

  it('names keys with bad values', () => {
    assert.throws(() => parseConfig({ root_dir: 'relative/dir' }), /config key "root_dir": must be an absolute path/);
    assert.throws(() => parseConfig({ streaming: { port: 70000 } }), /config key "streaming\.port"/);
    assert.throws(() => parseConfig({ default_runtime: 'kata' }), /config key "default_runtime": names no entry of \[runtimes\]/);
    assert.throws(() => parseConfig({ pod_subnet: 'ten' }), /config key "pod_subnet"/);
    assert.throws(() => parseConfig({ userns_refuse_host_id_overlap: 'yes' }), /config key "userns_refuse_host_id_overlap"/);
  });

  it('lets flags override the file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'minicri-config-'));
    try {
      const file = join(dir, 'minicri.toml');
      writeFileSync(file, 'log_level = "warn"\ncgroup_driver = "systemd"\n[cni]\nconf_dir = "/tmp/net.d"\n');
      const c = loadConfig(file, { cgroup_driver: 'cgroupfs', 'cni.bin_dirs': '/x,/y' });
      assert.equal(c.log_level, 'warn');
      assert.equal(c.cgroup_driver, 'cgroupfs');
      assert.equal(c.cni.conf_dir, '/tmp/net.d');
      assert.deepEqual(c.cni.bin_dirs, ['/x', '/y']);
      writeFileSync(file, 'log_level = \n');
      assert.throws(() => loadConfig(file, {}), /not valid TOML \(line 1/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a config file named explicitly that does not exist', () => {
    assert.throws(() => loadConfig('/nonexistent/minicri.toml', {}), ConfigError);
  });
});
