// multinet: RunPodSandbox of a pod with 0, 1 and 2 secondary networks (the multus annotation, each a bridge
// network defined in the bench's networks dir), p50 per count; and the floor: the same pod done by hand
// (ip netns, lo up, the bridge plugin's ADD on eth0 and on each netN, runc create + start of the pause).
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import type { CriClient } from '../test/support/cri-client.js';
import { FLOOR_NETNS_PREFIX, NETWORK, SECONDARY_NETWORKS, type BenchEnv } from './lib/env.js';
import { podRunBench } from './lib/pod-runs.js';
import { summarize, timed, type Summary } from './lib/stats.js';
import { bridgePlugin, floorDirs, runc, startPause, waitExited, type FloorDirs } from './floor.js';

export const SECONDARY_COUNTS = [0, 1, 2] as const;

export interface MultinetResult {
  errors: string[];
  /** RunPodSandbox by number of secondary networks. */
  run: Record<string, Summary>;
}

function networksOf(count: number) {
  return SECONDARY_NETWORKS.slice(0, count);
}

/** `n` timed RunPodSandbox (after one untimed) per secondary network count; stop and remove are not timed. */
export async function multinetBench(client: CriClient, logRoot: string, n: number): Promise<MultinetResult> {
  return podRunBench(client, logRoot, 'multinet', n, SECONDARY_COUNTS, (count) => `secondary${count}`, (config, count) => {
    if (count > 0) config.annotations!['k8s.v1.cni.cncf.io/networks'] = networksOf(count).map((s) => s.name).join(', ');
  });
}

/** One pod by hand with `count` secondary networks; whatever it made is undone, timing only its start. */
async function oneFloorPod(env: BenchEnv, d: FloorDirs, id: string, count: number, into: Record<string, number[]>): Promise<void> {
  const nsPath = `/var/run/netns/${id}`;
  const podDir = join(d.dir, id);
  const attached: { name: string; conf: Record<string, unknown>; ifName: string; result: unknown }[] = [];
  let netnsMade = false;
  try {
    const pausePid = await timed(into, 'run', async () => {
      await execa('ip', ['netns', 'add', id]);
      netnsMade = true;
      await execa('ip', ['-n', id, 'link', 'set', 'lo', 'up']);
      const nets = [{ name: NETWORK, conf: env.bridgeConf, ifName: 'eth0' }, ...networksOf(count).map((s, i) => ({ name: s.name, conf: env.secondaryConfs[s.name]!, ifName: `net${i + 1}` }))];
      for (const net of nets) attached.push({ ...net, result: await bridgePlugin(net.name, net.conf, 'ADD', id, nsPath, net.ifName) });
      return startPause(d, id, podDir, nsPath);
    });
    await runc(d, ['kill', id, 'KILL']);
    await waitExited(pausePid);
  } finally {
    await execa(d.runc, ['--root', d.runcRoot, 'delete', '--force', id], { reject: false });
    for (const a of attached.reverse()) await bridgePlugin(a.name, a.conf, 'DEL', id, nsPath, a.ifName, a.result).catch(() => undefined);
    if (netnsMade) await execa('ip', ['netns', 'del', id], { reject: false });
    await rm(podDir, { recursive: true, force: true });
  }
}

export async function multinetFloor(env: BenchEnv, n: number): Promise<MultinetResult> {
  const d = await floorDirs(env);
  const errors: string[] = [];
  const run: Record<string, Summary> = {};
  for (const count of SECONDARY_COUNTS) {
    const samples: Record<string, number[]> = {};
    for (let i = 0; i <= n; i++) {
      try {
        await oneFloorPod(env, d, `${FLOOR_NETNS_PREFIX}m${count}-${i}`, count, i === 0 ? {} : samples);
      } catch (err) {
        errors.push((err as Error).message);
      }
    }
    run[`secondary${count}`] = summarize(samples.run ?? []);
  }
  await rm(d.dir, { recursive: true, force: true });
  return { errors, run };
}
