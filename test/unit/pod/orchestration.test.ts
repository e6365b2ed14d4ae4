// RunPodSandbox and CreateContainer orchestration, driven through fakes of the domain's narrow interfaces:
// a failure at each step undoes exactly what was done before it, and the records only make legal moves.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { pino } from 'pino';
import { InvalidArgument } from '../../../core/errors.js';
import { silentLogger } from '../../../core/log.js';
import { createContainer } from '../../../pod/container-create.js';
import { removeContainer } from '../../../pod/container-remove.js';
import { startContainer } from '../../../pod/container-start.js';
import { removeSandbox } from '../../../pod/sandbox-remove.js';
import { runSandbox } from '../../../pod/sandbox-run.js';
import { markSandboxNotReady } from '../../../pod/state.js';
import { fakePods, NODE_FILES, STEPS, type FakePods, type Step } from '../../support/fake-pods.js';
import { containerConfig, sandboxConfig } from '../spec/fixtures.js';

/** What each step's undo is journaled as; steps without an inverse of their own are absent. */
const UNDO_OF: Partial<Record<Step, string>> = {
  shm: 'shm', netns: 'netns', cni: 'cni', rootfs: 'rootfs', create: 'create', start: 'create',
};

const entries = (f: FakePods, kind: 'do' | 'undo') =>
  f.journal.filter((e) => e.startsWith(`${kind}:`)).map((e) => e.slice(kind.length + 1));

/** Every inverse of a finished step ran, once; no inverse ran for a step never begun; inverses ran newest first. */
function assertUndoneExactly(f: FakePods, failed: Step): void {
  const done = entries(f, 'do') as Step[];
  const undone = entries(f, 'undo');
  const owed = new Set(done.flatMap((s) => UNDO_OF[s] ?? []));
  for (const u of owed) {
    assert.equal(undone.filter((x) => x === u).length, 1,
      `${u} was made before the failure at ${failed} and must be undone once: ${f.journal.join(' ')}`);
  }
  const begun = new Set([...f.attempted].flatMap((s) => UNDO_OF[s] ?? []));
  for (const u of undone) assert.ok(begun.has(u), `${u} was undone though never begun (failure at ${failed}): ${f.journal.join(' ')}`);
  const at = (e: string) => f.journal.indexOf(e);
  // CNI DEL needs the namespace, and the pause runs on its root filesystem: those undos come first.
  if (undone.includes('cni') && undone.includes('netns')) assert.ok(at('undo:cni') < at('undo:netns'), f.journal.join(' '));
  if (undone.includes('create') && undone.includes('rootfs')) assert.ok(at('undo:create') < at('undo:rootfs'), f.journal.join(' '));
}

const podConfig = (f: FakePods) => sandboxConfig({ log_directory: join(f.dir, 'logs') });

describe('RunPodSandbox orchestration', () => {
  let f: FakePods;
  beforeEach(() => { f = fakePods(); });
  afterEach(() => f.close());

  it('makes every part of the pod and only then records it READY', async () => {
    const id = await runSandbox(f.ctx, podConfig(f), '', silentLogger);
    assert.deepEqual(new Set(entries(f, 'do')), new Set(STEPS));
    assert.deepEqual(entries(f, 'undo'), []);
    const states = f.states.get(id)!;
    assert.equal(states.at(-1), 'SANDBOX_READY');
    assert.ok(states.slice(0, -1).every((s) => s === 'SANDBOX_NOTREADY'), states.join(' '));
    const record = f.ctx.tables.sandboxes.get(id)!;
    assert.deepEqual(record.ips, ['10.99.0.2']);
    assert.equal(record.creating, undefined);
    assert.equal(record.pausePid, 4242);
    assert.ok(existsSync(join(record.dir, 'hosts')) && existsSync(join(record.dir, 'config.json')));
    // Its startup timeline: every step once, each CNI plugin's ADD as the network reported it, and the total.
    const steps = record.timeline!.map((e) => e.step);
    assert.deepEqual(new Set(steps),
      new Set(['pause-image', 'shm', 'netns', 'pause-rootfs', 'pod-files', 'pause-create', 'pause-start', 'cni', 'cni-add', 'total']));
    assert.equal(steps.length, new Set(steps).size);
    assert.deepEqual(record.timeline!.find((e) => e.step === 'cni-add'), { step: 'cni-add', plugin: 'bridge', network: 'pods', ms: 1.5 });
    assert.ok(record.timeline!.every((e) => e.ms >= 0));
  });

  it('runs CNI ADD only once the pause\'s conmon is started, and not at all when the pause failed before that', async () => {
    await runSandbox(f.ctx, podConfig(f), '', silentLogger);
    assert.ok(f.journal.indexOf('launched:create') < f.journal.indexOf('begin:cni'), f.journal.join(' '));
    f.journal.length = 0;
    f.failing.add('rootfs');
    const other = { ...podConfig(f), metadata: { ...podConfig(f).metadata!, name: 'other' } };
    await assert.rejects(runSandbox(f.ctx, other, '', silentLogger), /injected failure at rootfs/);
    assert.ok(!f.journal.includes('begin:cni') && !f.journal.includes('launched:create'), f.journal.join(' '));
  });

  for (const failed of STEPS) {
    it(`a failure at ${failed} undoes exactly the steps done before it and leaves no record`, async () => {
      f.failing.add(failed);
      await assert.rejects(runSandbox(f.ctx, podConfig(f), '', silentLogger), new RegExp(`injected failure at ${failed}`));
      assertUndoneExactly(f, failed);
      assert.deepEqual(f.ctx.tables.sandboxes.list(), []);
      assert.deepEqual(readdirSync(join(f.ctx.settings.root_dir, 'sandboxes')), [], 'the pod directory is gone');
      for (const states of f.states.values()) assert.ok(!states.includes('SANDBOX_READY'), states.join(' '));
    });
  }

  it('writes the pod\'s name files from the node\'s, as the host reads them', async () => {
    const record = f.ctx.tables.sandboxes.get(await runSandbox(f.ctx, podConfig(f), '', silentLogger))!;
    const file = (name: string) => readFileSync(join(record.dir, name), 'utf8');
    assert.deepEqual([file('hostname'), file('resolv.conf')], ['web-0\n', NODE_FILES.resolvConf]);
    assert.doesNotMatch(file('hosts'), /node-1/, 'a pod with its own network gets only the loopback names');
    const hostNetwork = sandboxConfig(
      { log_directory: join(f.dir, 'logs'), metadata: { name: 'h', uid: 'uid-h', namespace: 'default', attempt: 0 } },
      { namespace_options: { network: 'NODE', pid: 'POD', ipc: 'POD', target_id: '', userns_options: null } });
    const onNode = f.ctx.tables.sandboxes.get(await runSandbox(f.ctx, hostNetwork, '', silentLogger))!;
    const nodeFile = (name: string) => readFileSync(join(onNode.dir, name), 'utf8');
    assert.deepEqual([nodeFile('hostname'), nodeFile('hosts')], [`${NODE_FILES.hostname}\n`, NODE_FILES.hosts]);
  });

  it('refuses an unknown runtime handler before it makes anything', async () => {
    await assert.rejects(runSandbox(f.ctx, podConfig(f), 'kata', silentLogger), /runtime handler "kata" is not configured/);
    assert.deepEqual(f.journal, []);
    assert.deepEqual(f.ctx.tables.sandboxes.list(), []);
  });

  it('refuses a request for networks that do not resolve before it makes anything; a host-network pod is not asked', async () => {
    const asked: string[] = [];
    f.ctx.network.checkPodNetworks = (pod) => {
      asked.push(pod.annotations['k8s.v1.cni.cncf.io/networks'] ?? '');
      throw new InvalidArgument('annotation k8s.v1.cni.cncf.io/networks: network ns/nope is not defined');
    };
    const config = podConfig(f);
    config.annotations = { 'k8s.v1.cni.cncf.io/networks': 'nope' };
    await assert.rejects(runSandbox(f.ctx, config, '', silentLogger),
      (err: Error & { code?: string }) => err.code === 'invalid-argument' && /ns\/nope is not defined/.test(err.message));
    assert.deepEqual(asked, ['nope']);
    assert.deepEqual(f.journal, []);
    assert.deepEqual(f.ctx.tables.sandboxes.list(), []);
    const hostNetwork = sandboxConfig({ log_directory: join(f.dir, 'logs'), annotations: config.annotations },
      { namespace_options: { network: 'NODE', pid: 'POD', ipc: 'POD', target_id: '', userns_options: null } });
    await runSandbox(f.ctx, hostNetwork, '', silentLogger);
    assert.deepEqual(asked, ['nope']);
  });

  const usernsPod = (f: FakePods) => sandboxConfig({ log_directory: join(f.dir, 'logs') }, {
    namespace_options: {
      network: 'POD', pid: 'POD', ipc: 'POD', target_id: '',
      userns_options: {
        mode: 'POD',
        uids: [{ host_id: 131072, container_id: 0, length: 65536 }], gids: [{ host_id: 131072, container_id: 0, length: 65536 }],
      },
    },
  });

  it('refuses a user-namespaced pod on a handler without the feature, before it makes anything', async () => {
    await assert.rejects(runSandbox(f.ctx, usernsPod(f), '', silentLogger), (err: Error & { code?: string }) =>
      err.code === 'failed-precondition' && /runtime handler "runc" does not support user namespaces/.test(err.message));
    assert.deepEqual(f.journal, []);
    assert.deepEqual(f.ctx.tables.sandboxes.list(), []);
  });

  it('pins a user-namespaced pod\'s network namespace from its started pause, then attaches the network', async () => {
    f.ctx.runtimeFeatures = new Map([['runc', { recursiveReadOnly: true, userNamespaces: true, missing: [] }]]);
    await runSandbox(f.ctx, usernsPod(f), '', silentLogger);
    const done = entries(f, 'do');
    assert.ok(done.indexOf('start') < done.indexOf('netns') && done.indexOf('netns') < done.indexOf('cni'), done.join(' '));
    f.journal.length = 0;
    f.failing.add('cni');
    const other = { ...usernsPod(f), metadata: { ...usernsPod(f).metadata!, name: 'other' } };
    await assert.rejects(runSandbox(f.ctx, other, '', silentLogger), /injected failure at cni/);
    assertUndoneExactly(f, 'cni');
  });

  it('runs a pod mapped onto the host\'s own ids (critest\'s 0:1000:100000) with a warning, or refuses it if configured', async () => {
    f.ctx.runtimeFeatures = new Map([['runc', { recursiveReadOnly: true, userNamespaces: true, missing: [] }]]);
    const critest = {
      mode: 'POD' as const,
      uids: [{ host_id: 1000, container_id: 0, length: 100000 }], gids: [{ host_id: 1000, container_id: 0, length: 100000 }],
    };
    const pod = (name: string) => sandboxConfig(
      { log_directory: join(f.dir, 'logs'), metadata: { name, uid: `uid-${name}`, namespace: 'default', attempt: 0 } },
      { namespace_options: { network: 'POD', pid: 'POD', ipc: 'POD', target_id: '', userns_options: critest } });
    const lines: string[] = [];
    const log = pino({ level: 'warn' }, { write: (line: string) => { lines.push(line); } });
    const id = await runSandbox(f.ctx, pod('low-ids'), '', log);
    assert.equal(f.ctx.tables.sandboxes.get(id)!.state, 'SANDBOX_READY');
    const warned = lines.map((l) => JSON.parse(l) as { level: number; msg: string });
    assert.equal(warned.length, 1, lines.join(''));
    assert.equal(warned[0]!.level, 40);
    assert.match(warned[0]!.msg,
      /uid mapping 0:1000:100000 and gid mapping 0:1000:100000 .*overlaps the host's own ids \(0-65535\).*overlap is false/);

    f.journal.length = 0;
    f.ctx.settings.userns_refuse_host_id_overlap = true;
    await assert.rejects(runSandbox(f.ctx, pod('refused'), '', silentLogger), (err: Error) =>
      err instanceof InvalidArgument
        && /overlaps the host's own ids \(0-65535\), which this node refuses \(userns_refuse_host_id_overlap = true\)/.test(err.message)
        && /: map the pod to ids from 65536 up$/.test(err.message));
    assert.deepEqual(f.journal, []);
    assert.deepEqual(f.ctx.tables.sandboxes.list().map((s) => s.id), [id]);
  });

  it('removal undoes what creation made, and the sandbox goes READY → NOTREADY before its record goes', async () => {
    const id = await runSandbox(f.ctx, podConfig(f), '', silentLogger);
    await removeSandbox(f.ctx, id, silentLogger);
    assert.deepEqual(new Set(entries(f, 'undo')), new Set(['shm', 'netns', 'cni', 'rootfs', 'create']));
    assert.equal(f.ctx.tables.sandboxes.get(id), undefined);
    const states = f.states.get(id)!;
    assert.deepEqual(states.slice(states.indexOf('SANDBOX_READY')).filter((s, i, all) => s !== all[i - 1]),
      ['SANDBOX_READY', 'SANDBOX_NOTREADY']);
  });
});

describe('CreateContainer orchestration', () => {
  let f: FakePods;
  let sandboxId: string;
  beforeEach(async () => {
    f = fakePods();
    sandboxId = await runSandbox(f.ctx, podConfig(f), '', silentLogger);
    f.journal.length = 0;
    f.attempted.clear();
  });
  afterEach(() => f.close());

  const config = () => containerConfig({
    image: { image: 'example.test/app:1', annotations: {}, user_specified_image: '', runtime_handler: '', image_ref: '' },
  });

  it('creates the container CREATED, then start moves it to RUNNING', async () => {
    const id = await createContainer(f.ctx, sandboxId, config(), null, silentLogger);
    assert.deepEqual(entries(f, 'do'), ['rootfs', 'facts', 'create']);
    assert.equal(f.ctx.tables.containers.get(id)!.creating, undefined);
    assert.deepEqual(f.ctx.tables.containers.get(id)!.timeline!.map((e) => e.step),
      ['image-lookup', 'rootfs', 'spec', 'runc-create', 'total']);
    await startContainer(f.ctx, id, silentLogger);
    assert.deepEqual(f.states.get(id)!.filter((s, i, all) => s !== all[i - 1]), ['CONTAINER_CREATED', 'CONTAINER_RUNNING']);
    assert.equal(f.ctx.tables.containers.get(id)!.timeline!.at(-1)!.step, 'runc-start');
    await assert.rejects(startContainer(f.ctx, id, silentLogger), /only a created container can be started/);
  });

  for (const failed of ['rootfs', 'facts', 'create'] as const) {
    it(`a failure at ${failed} undoes exactly the steps done before it and leaves the sandbox as it was`, async () => {
      f.failing.add(failed);
      await assert.rejects(createContainer(f.ctx, sandboxId, config(), null, silentLogger), new RegExp(`injected failure at ${failed}`));
      assertUndoneExactly(f, failed);
      assert.deepEqual(f.ctx.tables.containers.list(), []);
      assert.deepEqual(readdirSync(join(f.ctx.settings.root_dir, 'containers')), [], 'the container directory is gone');
      assert.equal(f.ctx.tables.sandboxes.get(sandboxId)!.state, 'SANDBOX_READY');
      for (const states of f.states.values()) {
        assert.ok(states.every((s) => s === 'CONTAINER_CREATED' || s.startsWith('SANDBOX')), states.join(' '));
      }
    });
  }

  it('a start that fails leaves the container EXITED with StartError, and removal undoes its creation', async () => {
    const id = await createContainer(f.ctx, sandboxId, config(), null, silentLogger);
    f.failing.add('start');
    await assert.rejects(startContainer(f.ctx, id, silentLogger), /injected failure at start/);
    const record = f.ctx.tables.containers.get(id)!;
    assert.deepEqual([record.state, record.reason, record.exitCode], ['CONTAINER_EXITED', 'StartError', 128]);
    await removeContainer(f.ctx, id, silentLogger);
    await f.ctx.background.drain();
    assert.deepEqual(new Set(entries(f, 'undo')), new Set(['rootfs', 'create']));
    assert.equal(f.ctx.tables.containers.get(id), undefined);
  });

  it('refuses id mappings on a mount of a pod in the host\'s user namespace, before it makes anything', async () => {
    const mapping = [{ host_id: 65536, container_id: 0, length: 65536 }];
    const c = config();
    c.mounts = [{
      container_path: '/data', host_path: f.dir, readonly: false, selinux_relabel: false, propagation: 'PROPAGATION_PRIVATE',
      uidMappings: mapping, gidMappings: mapping, recursive_read_only: false, image: null, image_sub_path: '',
    }];
    await assert.rejects(createContainer(f.ctx, sandboxId, c, null, silentLogger), (err: Error) =>
      err instanceof InvalidArgument
        && /mount "\/data" asks for an id-mapped mount, which only a pod in its own user namespace/.test(err.message));
    assert.deepEqual(f.journal, []);
    assert.deepEqual(f.ctx.tables.containers.list(), []);
  });

  it('refuses a container in a sandbox that is not ready, before it makes anything', async () => {
    f.ctx.tables.sandboxes.update(sandboxId, markSandboxNotReady);
    await assert.rejects(createContainer(f.ctx, sandboxId, config(), null, silentLogger), /is not ready/);
    assert.deepEqual(f.journal, []);
  });
});
