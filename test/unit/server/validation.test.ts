import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PodSandboxConfig__Output } from '../../../gen/runtime/v1/PodSandboxConfig.js';
import { InvalidArgument } from '../../../core/errors.js';
import { checkContainerConfig, checkPodSandboxConfig, runtimeHandlerNamed } from '../../../pod/validation.js';
import { containerConfig, mount } from '../spec/fixtures.js';

function config(change: (c: PodSandboxConfig__Output) => void = () => {}): PodSandboxConfig__Output {
  const c: PodSandboxConfig__Output = {
    metadata: { name: 'web', namespace: 'default', uid: 'u1', attempt: 0 },
    hostname: 'web', log_directory: '/var/log/pods/x', dns_config: null, port_mappings: [],
    labels: {}, annotations: {}, linux: null, windows: null,
  };
  change(c);
  return c;
}

function refused(c: PodSandboxConfig__Output, pattern: RegExp): void {
  assert.throws(() => checkPodSandboxConfig(c), (err) => err instanceof InvalidArgument && pattern.test(err.message));
}

describe('sandbox config validation', () => {
  it('accepts an ordinary pod', () => {
    checkPodSandboxConfig(config());
  });

  it('requires name, namespace and uid', () => {
    refused(config((c) => { c.metadata = null; }), /no metadata/);
    refused(config((c) => { c.metadata!.name = ''; }), /metadata\.name must not be empty/);
    refused(config((c) => { c.metadata!.namespace = ''; }), /metadata\.namespace must not be empty/);
    refused(config((c) => { c.metadata!.uid = ''; }), /metadata\.uid must not be empty/);
    refused(config((c) => { c.metadata!.name = 'a/../b'; }), /not allowed/);
    refused(config((c) => { c.metadata!.name = 'x'.repeat(300); }), /at most 253/);
  });

  it('refuses bad ports, hosts, directories and DNS servers before anything is made', () => {
    refused(config((c) => { c.port_mappings = [{ protocol: 'TCP', container_port: 80, host_port: 70000, host_ip: '' }]; }), /host_port must be 0-65535/);
    refused(config((c) => { c.port_mappings = [{ protocol: 'TCP', container_port: 0, host_port: 8080, host_ip: '' }]; }), /container_port/);
    refused(config((c) => { c.port_mappings = [{ protocol: 'TCP', container_port: 80, host_port: 8080, host_ip: 'localhost' }]; }), /host_ip/);
    refused(config((c) => { c.hostname = 'bad_host!'; }), /not a valid host name/);
    refused(config((c) => { c.log_directory = '/var/log/pods/../../etc'; }), /without "\.\."/);
    refused(config((c) => { c.log_directory = 'relative'; }), /absolute/);
    refused(config((c) => { c.dns_config = { servers: ['dns.example'], searches: [], options: [] }; }), /DNS server/);
    refused(config((c) => { c.annotations = { big: 'x'.repeat(300 * 1024) }; }), /at most 262144/);
  });

});

describe('container config validation', () => {
  const withMount = (over: Partial<Parameters<typeof mount>[0]>) => containerConfig({
    image: { image: 'busybox', annotations: {}, user_specified_image: '', runtime_handler: '', image_ref: '' },
    mounts: [mount({ container_path: '/r', host_path: '/h', readonly: true, recursive_read_only: true, ...over })],
  });
  it('takes a recursive read-only mount that is read-only and private', () => {
    checkContainerConfig(withMount({}));
  });
  it('refuses recursive read-only without readonly or with propagation, naming the mount', () => {
    assert.throws(() => checkContainerConfig(withMount({ readonly: false })), (err) => err instanceof InvalidArgument && /"\/r".*not read-only/.test(err.message));
    assert.throws(() => checkContainerConfig(withMount({ propagation: 'PROPAGATION_HOST_TO_CONTAINER' })), (err) => err instanceof InvalidArgument && /"\/r".*private propagation/.test(err.message));
  });
});

describe('runtime handler of a request', () => {
  it('is the default for an empty one, itself when configured, and refused naming the configured ones otherwise', () => {
    const configured = ['runc', 'crun'];
    assert.equal(runtimeHandlerNamed('', 'runc', configured), 'runc');
    assert.equal(runtimeHandlerNamed('crun', 'runc', configured), 'crun');
    assert.throws(() => runtimeHandlerNamed('kata', 'runc', configured),
      (err) => err instanceof InvalidArgument && err.message === 'runtime handler "kata" is not configured (have: runc, crun)');
    assert.throws(() => runtimeHandlerNamed('', 'gone', configured), (err) => err instanceof InvalidArgument && /"gone"/.test(err.message));
  });
});
