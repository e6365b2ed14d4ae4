// Checkpoint and restore of a container holding 100 MiB of anonymous memory (a shell variable filled at start):
// how long CheckpointContainer takes, how big its archive is, and how long the restore into a new pod takes,
// CreateContainer from the archive (unpacking it) and StartContainer (`runc restore`) apart. minicri only: the
// daemon runs with restores on and the CRIU test/support/criu.ts picks.
import { readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { CriClient } from '../test/support/cri-client.js';
import { sleep } from '../core/time.js';
import { benchContainer, benchPod } from './lib/pods.js';
import { round, since, now } from './lib/stats.js';

export const ANON_MIB = 100;
/**
 * Fills a shell variable with ANON_MIB of text (anonymous memory of the shell), says so, and waits in a loop (a
 * last command alone would be exec'd by the shell, and its memory gone with it).
 */
const HOLDER = ['sh', '-c', `x=$(yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa | head -c ${ANON_MIB * 1024 * 1024}); echo ready; while :; do sleep 3600; done`];

export interface CheckpointResult {
  anonMiB: number;
  checkpointMs: number;
  archiveMiB: number;
  /** CreateContainer from the archive: unpacked, rootfs made, left CREATED. */
  restoreCreateMs: number;
  /** StartContainer: runc restore. */
  restoreStartMs: number;
  restoreMs: number;
}

export async function checkpointBench(client: CriClient, image: string, logRoot: string, archiveDir: string): Promise<CheckpointResult> {
  const rt = client.runtime;
  const pods: string[] = [];
  const archive = join(archiveDir, `bench-${process.pid}-${Date.now()}.tar`);
  const run = async (prefix: string) => {
    const config = benchPod(prefix, logRoot);
    const { pod_sandbox_id: id } = await rt.call('RunPodSandbox', { config });
    pods.push(id);
    return { id, config };
  };
  try {
    const source = await run('ckpt');
    const holder = { ...benchContainer('holder', image), command: HOLDER };
    const { container_id: id } = await rt.call('CreateContainer', { pod_sandbox_id: source.id, config: holder, sandbox_config: source.config });
    await rt.call('StartContainer', { container_id: id });
    for (const deadline = Date.now() + 120_000; !(await ready(client, id));) {
      if (Date.now() > deadline) throw new Error(`the holder did not fill its ${ANON_MIB} MiB within 120 s`);
      await sleep(200);
    }
    let t0 = now();
    await rt.call('CheckpointContainer', { container_id: id, location: archive, timeout: 300 });
    const checkpointMs = since(t0);
    const archiveMiB = (await stat(archive)).size / 2 ** 20;
    if (archiveMiB < ANON_MIB) {
      const logPath = (await rt.call('ContainerStatus', { container_id: id })).status?.log_path ?? '';
      const said = (await readFile(logPath, 'utf8').catch(() => '')).slice(0, 400);
      throw new Error(`the archive is ${round(archiveMiB)} MiB: the holder's ${ANON_MIB} MiB are not in it (its log: ${said})`);
    }
    await rt.call('StopPodSandbox', { pod_sandbox_id: source.id });
    await rt.call('RemovePodSandbox', { pod_sandbox_id: source.id });

    const target = await run('rst');
    const restored = { ...benchContainer('holder', archive), command: [] };
    t0 = now();
    const { container_id: rid } = await rt.call('CreateContainer', { pod_sandbox_id: target.id, config: restored, sandbox_config: target.config });
    const restoreCreateMs = since(t0);
    const t1 = now();
    await rt.call('StartContainer', { container_id: rid });
    const restoreStartMs = since(t1);
    const state = (await rt.call('ContainerStatus', { container_id: rid })).status?.state;
    if (state !== 'CONTAINER_RUNNING') throw new Error(`the restored container is ${state}`);
    return {
      anonMiB: ANON_MIB, checkpointMs: round(checkpointMs), archiveMiB: round(archiveMiB), restoreCreateMs: round(restoreCreateMs),
      restoreStartMs: round(restoreStartMs), restoreMs: round(restoreCreateMs + restoreStartMs),
    };
  } finally {
    for (const id of pods) await rt.call('RemovePodSandbox', { pod_sandbox_id: id }).catch(() => undefined);
    await rm(archive, { force: true });
  }
}

/** The holder said it filled its memory (its log has "ready"). */
async function ready(client: CriClient, id: string): Promise<boolean> {
  const logPath = (await client.runtime.call('ContainerStatus', { container_id: id })).status?.log_path ?? '';
  return (await readFile(logPath, 'utf8').catch(() => '')).includes(' stdout F ready');
}
