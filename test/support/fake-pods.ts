// A pod domain wired to fakes of its narrow interfaces, for unit tests of the lifecycle's orchestration.
// Every fake step is journaled ("do:netns", "undo:netns"); any step can be made to fail; the records live
// in a real store in a temp dir, where the pod and container directories go too. The store freezes what it
// hands out (MINICRI_TEST_FROZEN_RECORDS), so a record changed anywhere but in its table's update throws.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Background } from '../../core/background.js';
import { KeyedLock } from '../../core/locks.js';
import { silentLogger } from '../../core/log.js';
import type { ImageRecord } from '../../oci/image/types.js';
import type { PodContext } from '../../pod/context.js';
import { podEvents } from '../../pod/events.js';
import type { ContainerRuntime, PodHost, PodImages, PodNetwork } from '../../pod/interfaces.js';
import { hostMechanics } from '../../pod/host.js';
import { openTables, type ContainerRecord, type SandboxRecord } from '../../pod/records.js';
import { Store } from '../../store/store.js';
import { hostFacts } from '../unit/spec/fixtures.js';

/** The steps a fake can be made to fail at, and what each one's undo is journaled as. */
export const STEPS = ['files', 'shm', 'netns', 'sysctls', 'cni', 'rootfs', 'facts', 'create', 'start'] as const;
export type Step = typeof STEPS[number];

export const IMAGE: ImageRecord = {
  id: 'sha256:1111', repoTags: ['example.test/app:1'], repoDigests: ['example.test/app@sha256:2222'], size: 1, layers: ['sha256:3333'],
  blobs: [],
  pinned: false, createdAt: 0,
  config: { entrypoint: ['/app'], cmd: [], env: [], workingDir: '/', user: '', exposedPorts: [], volumes: [], stopSignal: '', labels: {} },
};

export interface FakePods {
  ctx: PodContext;
  dir: string;
  /** Every fake step that ran to its end ("do:x") and every undo ("undo:x"), in order. */
  journal: string[];
  /** Steps that throw instead of doing their work. */
  failing: Set<Step>;
  /** The state of each record each time it was written, by id. */
  states: Map<string, string[]>;
  /** Steps that were asked for (whether they finished or failed). */
  attempted: Set<Step>;
  close(): void;
}

/** The node's name files as the fake host reads them (not this machine's). */
export const NODE_FILES = { hostname: 'node-1', resolvConf: 'nameserver 192.0.2.53\n', hosts: '127.0.0.1\tlocalhost\n192.0.2.1\tnode-1\n' };

export function fakePods(): FakePods {
  process.env.MINICRI_TEST_FROZEN_RECORDS = '1';
  const dir = mkdtempSync(join(tmpdir(), 'minicri-pods-'));
  const store = Store.open(join(dir, 'minicri.db'));
  const tables = openTables(store);
  const journal: string[] = [];
  const failing = new Set<Step>();
  const attempted = new Set<Step>();
  const states = new Map<string, string[]>();
  type Watched = { get(id: string): SandboxRecord | ContainerRecord | undefined; onChange(l: (id: string) => void): void };
  for (const table of [tables.sandboxes, tables.containers] as Watched[]) {
    table.onChange((id) => {
      const r = table.get(id);
      if (r) states.set(id, [...(states.get(id) ?? []), r.state]);
    });
  }
  const step = async <T>(name: Step, result: T): Promise<T> => {
    attempted.add(name);
    await new Promise((resolve) => setImmediate(resolve));
    if (failing.has(name)) throw new Error(`injected failure at ${name}`);
    journal.push(`do:${name}`);
    return result;
  };
  const undo = (name: string) => { journal.push(`undo:${name}`); };

  // Directories and files are real, in the temp dir; the node's own files are NODE_FILES.
  const host: PodHost = {
    makePodDir: hostMechanics.makePodDir,
    removeDir: hostMechanics.removeDir,
    nodeNameFiles: async () => NODE_FILES,
    writePodFiles: async (podDir, files) => hostMechanics.writePodFiles(podDir, await step('files', files)),
    writeBundleSpec: hostMechanics.writeBundleSpec,
    netnsPaths: hostMechanics.netnsPaths,
    createNetns: (_, __) => step('netns', undefined),
    removeNetns: async () => undo('netns'),
    netnsExists: async () => true,
    setNetnsSysctls: (_, __) => step('sysctls', undefined),
    holdLoopbackResets: async () => {},
    mountShm: () => step('shm', undefined),
    unmountShm: async () => undo('shm'),
    pinNetnsOf: () => step('netns', undefined),
    // The orchestration tests run no user-namespaced pods.
    stageUserns: async () => {},
    unstageUserns: async () => {},
  };
  const network: PodNetwork = {
    setUpPod: () => { journal.push('begin:cni'); return step('cni', {
      ips: ['10.99.0.2'], results: [], networkStatus: [], steps: [{ step: 'cni-add', plugin: 'bridge', network: 'pods', ms: 1.5 }],
    }); },
    tearDownPod: async () => undo('cni'),
    checkPod: async () => {},
    checkPodNetworks: () => {},
    secondaryNetworks: () => [],
    status: async () => ({ ready: true, reason: '', message: '' }),
    gc: async () => {},
    setPodCidr: () => {},
    deviceStatus: async () => undefined,
  };
  const runtime: ContainerRuntime = {
    // conmon is started (and its creation's caller told) before runc create can fail.
    create: (c) => { journal.push('launched:create'); c.launched?.(); return step('create', { pid: 4242 }); },
    restore: async () => ({ pid: 4243 }),
    start: () => step('start', undefined),
    state: async () => undefined,
    stop: async () => {},
    delete: async () => undo('create'),
    exitStatus: async () => undefined,
    exits: { mayHaveExited: () => false, onExit: () => {} },
    reopenLog: async () => {},
    execSync: async () => ({
      stdout: Buffer.alloc(0), stderr: Buffer.alloc(0), exitCode: 0, timedOut: false, stdoutTruncated: false, stderrTruncated: false,
    }),
    update: async () => {},
    checkpoint: async () => {},
    pause: async () => {},
    dump: async () => {},
    stopCutOffDumps: async () => {},
    resume: async () => {},
    list: async () => [],
    attachSocketPath: (id) => join(dir, id, 'attach'),
    commandLine: () => ({ path: 'runc', args: [] }),
  };
  const images: PodImages = {
    resolve: () => IMAGE,
    prepareRootfs: (key, imageId) => step('rootfs', {
      key, imageId, path: join(dir, 'rootfs', key), layers: [], mounted: true, readOnly: false,
      mount: { type: 'overlay' as const, source: 'overlay' as const, options: [`upperdir=${join(dir, 'upper', key)}`] },
    }),
    removeRootfs: async () => undo('rootfs'),
    gc: async () => {},
  };
  const ctx: PodContext = {
    settings: {
      root_dir: join(dir, 'root'), state_dir: join(dir, 'state'), netns_dir: join(dir, 'netns'),
      cgroup_driver: 'cgroupfs', default_runtime: 'runc',
      cni: { cache_dir: join(dir, 'cni'), conf_dir: join(dir, 'net.d'), networks_dir: join(dir, 'networks.d') },
    },
    tables, events: podEvents(tables, 16), locks: new KeyedLock(), background: new Background(silentLogger), log: silentLogger, network,
    runtimes: new Map([['runc', runtime]]), images, host,
    pauseImage: async () => ({ id: 'sha256:pause', name: 'localhost/minicri/pause:test', config: { Entrypoint: ['/pause'] } }),
    hostFacts: () => step('facts', hostFacts()),
    cdi: { resolve: async () => [], inventory: async () => ({ devices: [], errors: {} }) },
  };
  return {
    ctx, dir, journal, failing, states, attempted,
    close() {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
