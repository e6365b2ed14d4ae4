// Hostile and broken requests: each is refused with a specific code and a message naming what is
// wrong, the daemon keeps answering, and nothing is left on the host or in the store.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { ContainerConfig } from '../../../gen/runtime/v1/ContainerConfig.js';
import type { PodSandboxConfig } from '../../../gen/runtime/v1/PodSandboxConfig.js';
import type { CriClient } from '../../support/cri-client.js';
import { assertNothingLeft, hostSnapshot, type HostSnapshot } from '../../support/leaks.js';
import { podDaemon } from '../../support/pod-daemon.js';
import { containerConfig, PAUSE_IMAGE as PAUSE, podConfig } from '../../support/pods.js';

const { INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, RESOURCE_EXHAUSTED } = grpc.status;

interface Case {
  name: string;
  code: grpc.status;
  message: RegExp;
  call: (client: CriClient, ctx: { ready: string; notReady: string }) => Promise<unknown>;
}

const pod = (change: (c: PodSandboxConfig) => void) => podConfig('hostile', change);
const run = (config: PodSandboxConfig | null, runtimeHandler = '') => (c: CriClient) => c.runtime.call('RunPodSandbox', { config, runtime_handler: runtimeHandler });
const create = (change: (c: ContainerConfig) => void, sandbox: 'ready' | 'notReady' | 'unknown' = 'ready') =>
  (c: CriClient, ctx: { ready: string; notReady: string }) => c.runtime.call('CreateContainer', {
    pod_sandbox_id: sandbox === 'unknown' ? 'f'.repeat(64) : ctx[sandbox],
    config: containerConfig('app', PAUSE, ['/pause'], change),
  });

const CASES: Case[] = [
  { name: 'sandbox without config', code: INVALID_ARGUMENT, message: /needs a config/, call: run(null) },
  { name: 'sandbox without metadata', code: INVALID_ARGUMENT, message: /no metadata/, call: run(pod((c) => { c.metadata = null; })) },
  { name: 'empty pod name', code: INVALID_ARGUMENT, message: /metadata\.name must not be empty/, call: run(pod((c) => { c.metadata!.name = ''; })) },
  { name: 'empty pod namespace', code: INVALID_ARGUMENT, message: /metadata\.namespace must not be empty/, call: run(pod((c) => { c.metadata!.namespace = ''; })) },
  { name: 'empty pod uid', code: INVALID_ARGUMENT, message: /metadata\.uid must not be empty/, call: run(pod((c) => { c.metadata!.uid = ''; })) },
  { name: 'pod name with a path', code: INVALID_ARGUMENT, message: /not allowed in a name/, call: run(pod((c) => { c.metadata!.name = '../../etc'; })) },
  { name: 'oversized pod name', code: INVALID_ARGUMENT, message: /at most 253/, call: run(pod((c) => { c.metadata!.name = 'n'.repeat(10_000); })) },
  { name: 'invalid hostname', code: INVALID_ARGUMENT, message: /not a valid host name/, call: run(pod((c) => { c.hostname = 'host name;rm -rf'; })) },
  { name: 'relative log directory', code: INVALID_ARGUMENT, message: /log_directory/, call: run(pod((c) => { c.log_directory = 'var/log/pods'; })) },
  { name: 'log directory escaping with ..', code: INVALID_ARGUMENT, message: /log_directory/, call: run(pod((c) => { c.log_directory = '/var/log/pods/../../../etc'; })) },
  { name: 'host port out of range', code: INVALID_ARGUMENT, message: /host_port must be 0-65535/, call: run(pod((c) => { c.port_mappings = [{ protocol: 'TCP', container_port: 80, host_port: 65536 }]; })) },
  { name: 'container port zero', code: INVALID_ARGUMENT, message: /container_port must be 1-65535/, call: run(pod((c) => { c.port_mappings = [{ protocol: 'TCP', container_port: 0, host_port: 80 }]; })) },
  { name: 'host IP not an address', code: INVALID_ARGUMENT, message: /host_ip/, call: run(pod((c) => { c.port_mappings = [{ protocol: 'UDP', container_port: 53, host_port: 5353, host_ip: '1.2.3.4.5' }]; })) },
  { name: 'DNS server not an address', code: INVALID_ARGUMENT, message: /DNS server/, call: run(pod((c) => { c.dns_config = { servers: ['$(reboot)'] }; })) },
  { name: 'host-wide sysctl', code: INVALID_ARGUMENT, message: /kernel\.panic.*not namespaced/, call: run(pod((c) => { c.linux!.sysctls = { 'kernel.panic': '1' }; })) },
  { name: 'sysctl value the kernel refuses', code: INVALID_ARGUMENT, message: /net\.ipv4\.ip_local_port_range="banana"/, call: run(pod((c) => { c.linux!.sysctls = { 'net.ipv4.ip_local_port_range': 'banana' }; })) },
  { name: 'sysctl value with a newline', code: INVALID_ARGUMENT, message: /invalid value/, call: run(pod((c) => { c.linux!.sysctls = { 'net.ipv4.ip_forward': '1\nkernel.panic=1' }; })) },
  { name: 'unknown runtime handler', code: INVALID_ARGUMENT, message: /runtime handler "gvisor" is not configured/, call: run(pod(() => {}), 'gvisor') },
  { name: 'cgroup parent escaping with ..', code: INVALID_ARGUMENT, message: /cgroup/i, call: run(pod((c) => { c.linux!.cgroup_parent = '/minicri-test/../../escape'; })) },
  { name: 'relative cgroup parent', code: INVALID_ARGUMENT, message: /cgroup/i, call: run(pod((c) => { c.linux!.cgroup_parent = 'kubepods'; })) },
  { name: 'oversized annotations', code: INVALID_ARGUMENT, message: /at most 262144/, call: run(pod((c) => { c.annotations = { big: 'x'.repeat(300_000) }; })) },
  { name: 'empty label key', code: INVALID_ARGUMENT, message: /empty key/, call: run(pod((c) => { c.labels = { '': 'v' }; })) },
  { name: 'status of an unknown sandbox', code: NOT_FOUND, message: /not found/, call: (c) => c.runtime.call('PodSandboxStatus', { pod_sandbox_id: 'e'.repeat(64) }) },
  { name: 'status with an empty id', code: INVALID_ARGUMENT, message: /must not be empty/, call: (c) => c.runtime.call('PodSandboxStatus', { pod_sandbox_id: '' }) },
  { name: 'container in an unknown sandbox', code: NOT_FOUND, message: /not found/, call: create(() => {}, 'unknown') },
  { name: 'container in a stopped sandbox', code: FAILED_PRECONDITION, message: /not ready/, call: create(() => {}, 'notReady') },
  { name: 'container without config', code: INVALID_ARGUMENT, message: /needs a config/, call: (c, ctx) => c.runtime.call('CreateContainer', { pod_sandbox_id: ctx.ready, config: null }) },
  { name: 'container without a name', code: INVALID_ARGUMENT, message: /metadata\.name must not be empty/, call: create((c) => { c.metadata!.name = ''; }) },
  { name: 'container without an image', code: INVALID_ARGUMENT, message: /names no image/, call: create((c) => { c.image = { image: '' }; }) },
  { name: 'container image not present', code: NOT_FOUND, message: /example\.com\/absent:1/, call: create((c) => { c.image = { image: 'example.com/absent:1' }; }) },
  { name: 'container log path escaping', code: INVALID_ARGUMENT, message: /log_path/, call: create((c) => { c.log_path = '../../../../etc/cron.d/evil'; }) },
  { name: 'relative mount target', code: INVALID_ARGUMENT, message: /container_path/, call: create((c) => { c.mounts = [{ container_path: 'data', host_path: '/tmp' }]; }) },
  { name: 'relative mount source', code: INVALID_ARGUMENT, message: /host_path "relative\/dir" must be an absolute path/, call: create((c) => { c.mounts = [{ container_path: '/data', host_path: 'relative/dir' }]; }) },
  { name: 'command line over what the kernel execs', code: INVALID_ARGUMENT, message: /argument 1 is 4194305 bytes long; .* over 131072 bytes/, call: create((c) => { c.command = ['/pause', 'x'.repeat(4 * 1024 * 1024)]; }) },
  { name: 'environment variable without a name', code: INVALID_ARGUMENT, message: /empty name/, call: create((c) => { c.envs = [{ key: '', value: Buffer.from('x') }]; }) },
  { name: 'status of an unknown container', code: NOT_FOUND, message: /not found/, call: (c) => c.runtime.call('ContainerStatus', { container_id: 'd'.repeat(64) }) },
  { name: 'start of an unknown container', code: NOT_FOUND, message: /not found/, call: (c) => c.runtime.call('StartContainer', { container_id: 'd'.repeat(64) }) },
  { name: 'exec without a command', code: INVALID_ARGUMENT, message: /needs a command/, call: (c) => c.runtime.call('ExecSync', { container_id: 'd'.repeat(64), cmd: [] }) },
  { name: 'pull without a reference', code: INVALID_ARGUMENT, message: /needs an image reference/, call: (c) => c.image.call('PullImage', { image: { image: '' } }) },
  { name: 'pull of a malformed reference', code: INVALID_ARGUMENT, message: /Not\/A\/\/Ref/, call: (c) => c.image.call('PullImage', { image: { image: 'Not/A//Ref' } }) },
  { name: 'malformed pod CIDR', code: INVALID_ARGUMENT, message: /not a valid CIDR/, call: (c) => c.runtime.call('UpdateRuntimeConfig', { runtime_config: { network_config: { pod_cidr: '10.0.0.0/8,banana' } } }) },
  { name: 'oversized request', code: RESOURCE_EXHAUSTED, message: /./, call: (c) => c.runtime.call('Version', { version: 'v'.repeat(20 * 1024 * 1024) }) },
];

describe('hostile input', () => {
  const ctx = { ready: '', notReady: '' };
  let withPods: HostSnapshot;
  // Registered before the fixture's own: the pods go before the daemon stops.
  after(async () => {
    for (const id of [ctx.ready, ctx.notReady]) await env.daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: id });
  });
  const env = podDaemon(67, 'the hostile input tests');

  before(async () => {
    const { daemon } = env;
    ctx.ready = (await daemon.client.runtime.call('RunPodSandbox', { config: podConfig('hostile-ready') })).pod_sandbox_id;
    ctx.notReady = (await daemon.client.runtime.call('RunPodSandbox', { config: podConfig('hostile-stopped') })).pod_sandbox_id;
    await daemon.client.runtime.call('StopPodSandbox', { pod_sandbox_id: ctx.notReady });
    // The host with the two pods: each refusal must leave it exactly so.
    withPods = await hostSnapshot();
  });

  it('stops an unknown sandbox or container as already stopped, as the CRI makes stop idempotent', async () => {
    const { daemon } = env;
    assert.deepEqual(await daemon.client.runtime.call('StopPodSandbox', { pod_sandbox_id: 'e'.repeat(64) }), {});
    assert.deepEqual(await daemon.client.runtime.call('StopContainer', { container_id: 'd'.repeat(64), timeout: 0 }), {});
  });

  for (const c of CASES) {
    it(`refuses ${c.name}`, async () => {
      const { daemon, net } = env;
      await assert.rejects(c.call(daemon.client, ctx), (err: grpc.ServiceError) => {
        assert.equal(grpc.status[err.code], grpc.status[c.code], err.details);
        assert.match(err.details, c.message);
        return true;
      });
      assert.equal((await daemon.client.runtime.call('Version', {})).runtime_name, 'minicri', 'the daemon still answers');
      const sandboxes = (await daemon.client.runtime.call('ListPodSandbox', {})).items.map((i) => i.id).sort();
      assert.deepEqual(sandboxes, [ctx.ready, ctx.notReady].sort(), 'no sandbox was left behind');
      assert.deepEqual((await daemon.client.runtime.call('ListContainers', {})).containers, [], 'no container was left behind');
      assert.equal((await net.allocatedIps()).length, 1, 'only the ready pod holds an IP');
      await assertNothingLeft(withPods, `refusing ${c.name}`);
    });
  }
});
