// The one walk over a pod's attachments: its order for set-up and tear-down, and what a failure midway does.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  fallbackAttachments,
  forEachAttachment,
  plannedAttachments,
  validAttachments,
  walkSteps,
  withFallbacks,
  type Attachment,
  type Walk,
} from '../../../cni/attachments.js';
import type { CachedAttachment } from '../../../cni/cache.js';
import { LOOPBACK_NETWORK, parseNetworkList } from '../../../cni/config.js';
import type { PodPlan, SecondaryPlan } from '../../../cni/pod-plan.js';

const list = (name: string, plugins: Record<string, unknown>[] = [{ type: 'bridge' }]) =>
  parseNetworkList(Buffer.from(JSON.stringify({ cniVersion: '1.0.0', name, plugins })), `${name}.conflist`);

const args: [string, string][] = [['K8S_POD_NAME', 'p']];
const pod = { containerId: 'c1', netns: '/run/netns/p', args, caps: { cgroupPath: '/pods/p' } };

function secondary(name: string, ifName: string, extra: Partial<SecondaryPlan> = {}): SecondaryPlan {
  return { key: `pods/${name}`, ifName, selection: { name, namespace: 'pods' }, list: list(name), ...extra };
}

const plan: PodPlan = {
  main: list('cluster'),
  mainName: 'cluster',
  secondaries: [secondary('b', 'net1'), secondary('a', 'net2'), secondary('c', 'net3')],
};

const names = (as: Attachment[]) => as.map((a) => a.inv.ifName);

/** Runs the walk, recording when each action starts (+) and ends (-), and the failures it reports. */
async function record(attachments: Attachment[], walk: Walk, fails: string[] = []) {
  const events: string[] = [];
  const failures = await forEachAttachment(attachments, walk, async (a) => {
    events.push(`+${a.inv.ifName}`);
    await new Promise((resolve) => setImmediate(resolve));
    events.push(`-${a.inv.ifName}`);
    if (fails.includes(a.inv.ifName)) throw new Error(`${a.inv.ifName} failed`);
  });
  const started = events.filter((e) => e.startsWith('+')).map((e) => e.slice(1));
  return { events, started, failures: failures.map((f) => [f.attachment.inv.ifName, f.error.message]) };
}

test('set-up makes lo and eth0 at once, then each secondary attachment alone in the order the pod asked for', async () => {
  const attachments = plannedAttachments(plan, pod);
  assert.deepEqual(names(attachments), ['lo', 'eth0', 'net1', 'net2', 'net3']);
  const planned = plan.secondaries.map((s) => s.ifName);
  assert.deepEqual(walkSteps(attachments, { direction: 'attach', planned }).map(names), [['lo', 'eth0'], ['net1'], ['net2'], ['net3']]);
  const run = await record(attachments, { direction: 'attach', planned, stopAtFailure: true });
  // Both of the first step start before either ends; each later one starts after the one before it ended.
  assert.deepEqual(run.events, ['+lo', '+eth0', '-lo', '-eth0', '+net1', '-net1', '+net2', '-net2', '+net3', '-net3']);
  assert.deepEqual(run.failures, []);
});

test('tear-down undoes them one at a time in reverse: secondaries last-made first, then eth0, lo last', async () => {
  const attachments = plannedAttachments(plan, pod);
  const planned = plan.secondaries.map((s) => s.ifName);
  const run = await record(attachments, { direction: 'detach', planned, stopAtFailure: false });
  assert.deepEqual(run.events, ['+net3', '-net3', '+net2', '-net2', '+net1', '-net1', '+eth0', '-eth0', '+lo', '-lo']);
});

test('the cache\'s attach times decide the order over the pod\'s request; interfaces neither knows are undone first', () => {
  const at = (a: Attachment, attachedAt: number): Attachment => ({ ...a, attachedAt });
  const [lo, eth0, net1, net2, net3] = plannedAttachments(plan, pod) as [Attachment, Attachment, Attachment, Attachment, Attachment];
  const orphan: Attachment = { list: list('gone'), inv: { ...pod, ifName: 'old0' } };
  // Cache order (file names) is arbitrary: net2 was made before net1 here.
  const cached = [orphan, at(net1, 30), at(eth0, 10), at(net2, 20), at(lo, 11)];
  const planned = ['net1', 'net2', 'net3'];
  const detach = walkSteps([...cached, net3], { direction: 'detach', planned });
  assert.deepEqual(detach.map(names), [['old0'], ['net3'], ['net1'], ['net2'], ['eth0'], ['lo']]);
  assert.deepEqual(walkSteps(cached, { direction: 'attach' }).map(names), [['lo', 'eth0'], ['net2'], ['net1'], ['old0']]);
});

test('a failure midway of set-up stops the walk: what was made is known, nothing after it runs', async () => {
  const attachments = plannedAttachments(plan, pod);
  const planned = plan.secondaries.map((s) => s.ifName);
  const run = await record(attachments, { direction: 'attach', planned, stopAtFailure: true }, ['net2']);
  assert.deepEqual(run.started, ['lo', 'eth0', 'net1', 'net2']);
  assert.deepEqual(run.failures, [['net2', 'net2 failed']]);
  // A failure in the first step: both of it ran to the end and both failures are reported; no secondary runs.
  const first = await record(attachments, { direction: 'attach', planned, stopAtFailure: true }, ['lo', 'eth0']);
  assert.deepEqual(first.events, ['+lo', '+eth0', '-lo', '-eth0']);
  assert.deepEqual(first.failures, [['lo', 'lo failed'], ['eth0', 'eth0 failed']]);
});

test('a failure midway of tear-down does not stop it: every attachment is tried, every failure reported in order', async () => {
  const attachments = plannedAttachments(plan, pod);
  const run = await record(attachments, { direction: 'detach', planned: ['net1', 'net2', 'net3'], stopAtFailure: false }, ['net2', 'eth0']);
  assert.deepEqual(run.started, ['net3', 'net2', 'net1', 'eth0', 'lo']);
  assert.deepEqual(run.failures, [['net2', 'net2 failed'], ['eth0', 'eth0 failed']]);
});

test('planned attachments: each secondary gets its interface, the selection\'s cni-args and capabilities, its device', () => {
  const selection = { name: 'vf', namespace: 'pods', mac: '02:00:00:00:00:01', cniArgs: { color: 'blue' } };
  const vf = secondary('vf', 'net2', { selection });
  const withVf = { ...plan, secondaries: [secondary('a', 'net1'), vf] };
  const [lo, eth0, net1, net2] = plannedAttachments(withVf, pod, [undefined, '0000:00:1f.1']);
  assert.equal(lo!.list, LOOPBACK_NETWORK);
  assert.deepEqual(eth0!.inv, { ...pod, ifName: 'eth0' });
  assert.deepEqual(net1!.inv, { ...pod, ifName: 'net1', caps: { cgroupPath: '/pods/p' } });
  assert.deepEqual(net2!.inv.args, [['K8S_POD_NAME', 'p'], ['color', 'blue']]);
  assert.deepEqual(net2!.inv.caps, { cgroupPath: '/pods/p', mac: '02:00:00:00:00:01', deviceID: '0000:00:1f.1' });
  assert.equal(net2!.list.plugins[0]!.raw.deviceID, '0000:00:1f.1');
  assert.deepEqual(net2!.list.plugins[0]!.raw.args, { cni: { color: 'blue' } });
  assert.equal(net2!.secondary, vf);
});

test('cni-args that set an address or MAC reach CNI_ARGS and args.cni only on a network declaring that capability (#31)', () => {
  const cniArgs = { IP: '10.1.1.9/24', ips: '10.1.1.8/24', MAC: '02:00:00:00:00:09', color: 'blue' };
  const cases: [Record<string, unknown>, string[]][] = [
    [{}, ['color']],
    [{ ips: true }, ['IP', 'ips', 'color']],
    [{ mac: true }, ['MAC', 'color']],
    [{ ips: true, mac: true }, ['IP', 'ips', 'MAC', 'color']],
  ];
  for (const [capabilities, allowed] of cases) {
    const s = { ...secondary('s', 'net1'), selection: { name: 's', namespace: 'pods', cniArgs }, list: list('s', [{ type: 'bridge', capabilities }, { type: 'tuning' }]) };
    const [, , net1] = plannedAttachments({ ...plan, secondaries: [s] }, pod);
    const expected = Object.fromEntries(Object.entries(cniArgs).filter(([k]) => allowed.includes(k)));
    assert.deepEqual(net1!.inv.args, [['K8S_POD_NAME', 'p'], ...Object.entries(expected)], JSON.stringify(capabilities));
    for (const plugin of net1!.list.plugins) assert.deepEqual(plugin.raw.args, { cni: expected }, JSON.stringify(capabilities));
  }
});

test('tear-down fallbacks: the plan\'s networks for interfaces without a cache entry, never a device-backed one', () => {
  const withDevice = { ...plan, secondaries: [secondary('a', 'net1'), secondary('vf', 'net2', { resourceName: 'example.com/vf' })] };
  assert.deepEqual(names(fallbackAttachments(withDevice, undefined, pod)), ['net1', 'eth0', 'lo']);
  // Without a plan (definitions gone), eth0 goes through the default network, if there is one.
  const byDefault = fallbackAttachments(undefined, list('cluster'), pod);
  assert.deepEqual(byDefault.map((a) => [a.list.name, a.inv.ifName]), [['cluster', 'eth0'], ['cni-loopback', 'lo']]);
  assert.deepEqual(names(fallbackAttachments(undefined, undefined, pod)), ['lo']);
  const cachedEth0: Attachment = { list: list('older'), inv: { ...pod, ifName: 'eth0' } };
  const merged = withFallbacks([cachedEth0], fallbackAttachments(withDevice, list('cluster'), pod));
  assert.deepEqual(merged.map((a) => [a.list.name, a.inv.ifName]), [['older', 'eth0'], ['a', 'net1'], ['cni-loopback', 'lo']]);
});

test('GC\'s valid attachments: per network, the cached ones of valid sandboxes but loopback, and every valid eth0', () => {
  const entry = (containerId: string, networkName: string, ifName: string): CachedAttachment =>
    ({ kind: 'cniCacheV1', containerId, networkName, ifName, config: '' });
  const entries = [entry('s1', 'cluster', 'eth0'), entry('s1', 'cni-loopback', 'lo'), entry('s1', 'a', 'net1'), entry('gone', 'a', 'net1')];
  const got = validAttachments(list('cluster'), [list('a'), list('b'), list('a')], entries, ['s1', 's2']);
  assert.deepEqual(got.map((t) => [t.list.name, t.attachments.map((a) => `${a.containerID}/${a.ifname}`)]), [
    ['cluster', ['s1/eth0', 's2/eth0']],
    ['a', ['s1/net1']],
    ['b', []],
  ]);
});
