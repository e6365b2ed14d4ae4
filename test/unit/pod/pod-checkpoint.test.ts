// The pure parts of CheckpointPod and RestorePod: request checks, the manifest's reading, matching the request's
// containers to the checkpoint's, and which secondary addresses a restore keeps.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FailedPrecondition, InvalidArgument } from '../../../core/errors.js';
import { addressKeeping } from '../../../cni/pod-plan.js';
import { parseNetworkList } from '../../../cni/config.js';
import type { ContainerConfig__Output } from '../../../gen/runtime/v1/ContainerConfig.js';
import { checkCheckpointPodRequest, checkNoOptions } from '../../../pod/pod-checkpoint.js';
import {
  checkAddressesFree, checkKeptAddresses, checkpointedAttachments, checkSameProcess, firstRepeated, matchContainers, parsePodManifest,
  planSecondaryAddresses, type CheckpointedContainer,
} from '../../../pod/pod-checkpoint-manifest.js';
import { checkRestorePodRequest, type RestorePodRequest } from '../../../pod/pod-restore.js';

const ID = 'a'.repeat(64);
const request = (over: Partial<Parameters<typeof checkCheckpointPodRequest>[0]> = {}) =>
  ({ podSandboxId: 'p', outputPath: '/out', containerIds: ['c1', 'c2'], options: {}, ...over });

function config(name: string, over: Partial<ContainerConfig__Output> = {}) {
  return { metadata: { name, attempt: 0 }, image: { image: 'busybox' }, command: ['sh'], args: [], working_dir: '', mounts: [], envs: [], labels: {}, annotations: {}, ...over } as
    unknown as ContainerConfig__Output & { metadata: { name: string; attempt: number } };
}

const container = (name: string, over: Partial<CheckpointedContainer> = {}): CheckpointedContainer =>
  ({ name, id: ID, archive: `containers/${ID}.tar`, image: { id: 'sha256:1', name: 'busybox' }, command: ['sh'], args: [], workingDir: '', ...over });

const manifest = (over: Record<string, unknown> = {}) => JSON.stringify({
  version: 1, checkpointedAt: '2026-11-27T10:00:00Z', pod: { namespace: 'ns', name: 'web', uid: 'u1' }, runtimeHandler: 'runc', config: {},
  networks: [{ network: 'ns/sec', interface: 'net1', cidrs: ['10.1.1.5/24'], default: false }], containers: [container('one')], ...over,
});

describe('CheckpointPod request', () => {
  it('needs a deadline, an absolute output path, container ids once each, and no options', () => {
    assert.doesNotThrow(() => checkCheckpointPodRequest(request(), Date.now() + 1000));
    const refused: [Partial<ReturnType<typeof request>>, number | undefined, RegExp][] = [
      [{}, undefined, /needs a deadline/],
      [{ outputPath: '' }, 1, /not an absolute path/],
      [{ outputPath: 'out' }, 1, /not an absolute path/],
      [{ containerIds: [] }, 1, /container_ids is empty/],
      [{ containerIds: ['c1', 'c1'] }, 1, /names "c1" twice/],
      [{ containerIds: ['c1', ''] }, 1, /empty id/],
      [{ options: { 'leave-running': 'false' } }, 1, /option "leave-running" not supported/],
    ];
    for (const [over, deadline, re] of refused) {
      assert.throws(() => checkCheckpointPodRequest(request(over), deadline), (e: Error) => e instanceof InvalidArgument && re.test(e.message), re.source);
    }
    assert.throws(() => checkNoOptions('RestorePod', { a: '1', b: '2' }), /options "a", "b" not supported/);
  });
});

describe('RestorePod request', () => {
  const restore = (over: Partial<RestorePodRequest> = {}): RestorePodRequest => ({
    checkpointPath: '/ckpt', config: null, runtimeHandler: '', options: {}, containerConfigs: [config('one')], stopSignals: [0], ...over,
  });
  it('needs a deadline, an absolute checkpoint path, configs with unique names, and no options', () => {
    assert.deepEqual(checkRestorePodRequest(restore(), 1).map((c) => c.metadata.name), ['one']);
    const refused: [Partial<RestorePodRequest>, number | undefined, RegExp][] = [
      [{}, undefined, /needs a deadline/],
      [{ checkpointPath: 'rel' }, 1, /not an absolute path/],
      [{ containerConfigs: [] }, 1, /container_configs is empty/],
      [{ containerConfigs: [config('one'), config('one')] }, 1, /names "one" twice/],
      [{ containerConfigs: [config('')] }, 1, /metadata.name must not be empty/],
      [{ options: { x: 'y' } }, 1, /option "x" not supported/],
    ];
    for (const [over, deadline, re] of refused) {
      assert.throws(() => checkRestorePodRequest(restore(over), deadline), (e: Error) => e instanceof InvalidArgument && re.test(e.message), re.source);
    }
  });
});

describe('the pod checkpoint manifest', () => {
  it('reads back what CheckpointPod writes', () => {
    const m = parsePodManifest(manifest(), 'x');
    assert.deepEqual(m.pod, { namespace: 'ns', name: 'web', uid: 'u1' });
    assert.deepEqual(m.containers, [container('one')]);
    assert.deepEqual(m.networks, [{ network: 'ns/sec', interface: 'net1', cidrs: ['10.1.1.5/24'], default: false }]);
  });
  it('refuses what is not one: other versions, no pod, no containers, archives outside containers/, a name twice', () => {
    const bad: [string, RegExp][] = [
      ['{', /not JSON/],
      [manifest({ version: 2 }), /version 2, not 1/],
      [manifest({ pod: { namespace: 'ns' } }), /names no pod/],
      [manifest({ containers: [] }), /lists no containers/],
      [manifest({ containers: [{ name: 'one' }] }), /malformed container entry #1/],
      [manifest({ containers: [container('one', { archive: '../../etc/shadow' })] }), /names archive "\.\.\/\.\.\/etc\/shadow"/],
      [manifest({ containers: [container('one', { archive: `containers/${ID}.tar/../x` })] }), /names archive/],
      [manifest({ containers: [container('one'), container('one')] }), /lists container "one" twice/],
    ];
    for (const [text, re] of bad) assert.throws(() => parsePodManifest(text, 'ckpt'), (e: Error) => e instanceof InvalidArgument && re.test(e.message), re.source);
  });
  it('records each attachment with the prefix lengths its CNI result gives', () => {
    const status = [
      { name: 'pods', interface: 'eth0', ips: ['10.233.1.5'], mac: '02:00:00:00:00:01', default: true, dns: {} },
      { name: 'ns/sec', interface: 'net1', ips: ['10.1.1.5'], dns: {}, 'device-info': { type: 'pci' } },
    ];
    const results = [{ ips: [{ address: '127.0.0.1/8' }] }, { ips: [{ address: '10.233.1.5/24' }] }, { ips: [{ address: '10.1.1.5/16' }] }];
    assert.deepEqual(checkpointedAttachments(status, results), [
      { network: 'pods', interface: 'eth0', cidrs: ['10.233.1.5/24'], mac: '02:00:00:00:00:01', default: true },
      { network: 'ns/sec', interface: 'net1', cidrs: ['10.1.1.5/16'], default: false, deviceInfo: { type: 'pci' } },
    ]);
  });
});

describe('matching a restore request to the checkpoint', () => {
  it('pairs configs with checkpointed containers by name, in the request\'s order', () => {
    const pairs = matchContainers([container('one'), container('two')], [config('two'), config('one')], 'ckpt');
    assert.deepEqual(pairs.map((p) => [p.config.metadata.name, p.container.name]), [['two', 'two'], ['one', 'one']]);
  });
  it('refuses names either side lacks, naming them', () => {
    assert.throws(() => matchContainers([container('one'), container('two')], [config('one')], 'ckpt'),
      (e: Error) => e instanceof InvalidArgument && /no container_configs entry for "two"/.test(e.message));
    assert.throws(() => matchContainers([container('one')], [config('one'), config('three')], 'ckpt'),
      (e: Error) => e instanceof InvalidArgument && /no container named "three" in the checkpoint/.test(e.message));
  });
  it('matches and finds repeats in linear time: a 200k-entry request or manifest does not hold the event loop', () => {
    const names = Array.from({ length: 200_000 }, (_, i) => `c${i}`);
    const started = Date.now();
    assert.equal(firstRepeated([...names, 'c7']), 'c7');
    assert.equal(firstRepeated(names), undefined);
    assert.equal(matchContainers(names.map((n) => container(n)), names.map((n) => config(n)), 'ckpt').at(-1)!.container.name, 'c199999');
    assert.ok(Date.now() - started < 10_000, 'done within 10 s (quadratic checks took about half a minute)');
  });
  it('refuses a request that describes another process', () => {
    assert.doesNotThrow(() => checkSameProcess(container('one'), config('one')));
    assert.throws(() => checkSameProcess(container('one'), config('one', { args: ['-c', 'true'] })),
      (e: Error) => e instanceof FailedPrecondition && /args \["-c","true"\]/.test(e.message));
    assert.throws(() => checkSameProcess(container('one'), config('one', { working_dir: '/tmp' })), /working_dir "\/tmp"/);
  });
});

describe('secondary addresses of a restored pod', () => {
  const recorded = [
    { network: 'pods', interface: 'eth0', cidrs: ['10.233.1.5/24'], default: true },
    { network: 'ns/sec', interface: 'net1', cidrs: ['10.1.1.5/24'], default: false },
    { network: 'ns/other', interface: 'net2', cidrs: ['10.2.2.9/24'], default: false },
  ];
  const annotations = { 'k8s.v1.cni.cncf.io/networks': 'sec, other', keep: 'me' };
  it('asks again for the address where the network declares the ips capability, expects it with static IPAM, renews it elsewhere', () => {
    const plan = planSecondaryAddresses(annotations, 'ns', recorded,
      [{ key: 'ns/sec', ifName: 'net1', keeping: 'ips-capability' }, { key: 'ns/other', ifName: 'net2', keeping: 'none' }]);
    assert.deepEqual(JSON.parse(plan.annotations['k8s.v1.cni.cncf.io/networks']!), [
      { name: 'sec', namespace: 'ns', interface: 'net1', ips: ['10.1.1.5/24'] }, { name: 'other', namespace: 'ns' },
    ]);
    assert.equal(plan.annotations.keep, 'me');
    assert.deepEqual(plan.kept, [{ network: 'ns/sec', interface: 'net1', cidrs: ['10.1.1.5/24'] }]);
    assert.deepEqual(plan.renewed, [{ network: 'ns/other', interface: 'net2' }]);
    const fixed = planSecondaryAddresses(annotations, 'ns', recorded,
      [{ key: 'ns/sec', ifName: 'net1', keeping: 'static-ipam' }, { key: 'ns/other', ifName: 'net2', keeping: 'none' }]);
    assert.equal(fixed.annotations, annotations, 'static IPAM fixes the address: the annotation stays');
    assert.deepEqual(fixed.kept.map((k) => k.network), ['ns/sec']);
  });
  it('refuses a request asking for other addresses than the checkpointed ones', () => {
    const asking = { 'k8s.v1.cni.cncf.io/networks': '[{"name":"sec","ips":["10.1.1.6/24"]}]' };
    assert.throws(() => planSecondaryAddresses(asking, 'ns', recorded, [{ key: 'ns/sec', ifName: 'net1', keeping: 'ips-capability' }]),
      (e: Error) => e instanceof InvalidArgument && /asks for addresses 10\.1\.1\.6\/24, the checkpointed pod had 10\.1\.1\.5\/24/.test(e.message));
  });
  it('knows a network that can keep an address by its plugins', () => {
    const list = (plugin: object) => parseNetworkList(Buffer.from(JSON.stringify({ cniVersion: '1.0.0', name: 'n', plugins: [plugin] })), 'test');
    assert.equal(addressKeeping(list({ type: 'bridge', capabilities: { ips: true }, ipam: { type: 'host-local' } })), 'ips-capability');
    assert.equal(addressKeeping(list({ type: 'macvlan', ipam: { type: 'static', addresses: [{ address: '10.1.1.5/24' }] } })), 'static-ipam');
    assert.equal(addressKeeping(list({ type: 'bridge', ipam: { type: 'host-local' } })), 'none');
  });
  it('finds an address another pod holds on the same network, and checks the restored pod got what it kept', () => {
    const kept = [{ network: 'ns/sec', interface: 'net1', cidrs: ['10.1.1.5/24'] }];
    const holder = (network: string, networkAttached = true) =>
      ({ id: 'h', pod: 'ns/holder', networkAttached, networkStatus: [{ name: network, interface: 'net1', ips: ['10.1.1.5'] }] });
    assert.doesNotThrow(() => checkAddressesFree(kept, [holder('ns/elsewhere')]));
    assert.doesNotThrow(() => checkAddressesFree(kept, [holder('ns/sec', false)]), 'a stopped pod keeps its status, not its address');
    assert.throws(() => checkAddressesFree(kept, [holder('ns/sec')]),
      (e: Error) => e instanceof FailedPrecondition && /address 10\.1\.1\.5 of the checkpointed pod is taken by pod ns\/holder/.test(e.message));
    assert.doesNotThrow(() => checkKeptAddresses(kept, [{ network: 'ns/sec', interface: 'net1', cidrs: ['10.1.1.5/24'], default: false }]));
    assert.throws(() => checkKeptAddresses(kept, [{ network: 'ns/sec', interface: 'net1', cidrs: ['10.1.1.7/24'], default: false }]),
      (e: Error) => e instanceof FailedPrecondition && /gave the restored pod 10\.1\.1\.7\/24, not the checkpointed 10\.1\.1\.5\/24/.test(e.message));
  });
});
