// Checkpoint and restore of a container holding 100 MiB of anonymous memory (a shell variable filled at start):
// how long CheckpointContainer takes, how big its archive is, and how long the restore into a new pod takes,
// CreateContainer from the archive (unpacking it) and StartContainer (`runc restore`) apart; then the same
// container alone in a pod through CheckpointPod and RestorePod (then StartContainer). minicri only: the daemon
// runs with restores on and the CRIU test/support/criu.ts picks.
import { mkdir, readdir, readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { PodSandboxConfig } from '../gen/runtime/v1/PodSandboxConfig.js';
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
  /** CheckpointPod of a pod holding that one container. */
  podCheckpointMs: number;
  /** Everything CheckpointPod wrote (pod.json and the container's archive). */
  podCheckpointMiB: number;
  /** RestorePod: a new sandbox, the container unpacked and left CREATED. */
  podRestoreMs: number;
  /** StartContainer of the container RestorePod made: runc restore. */
  podRestoreStartMs: number;
}

export async function checkpointBench(client: CriClient, image: string, logRoot: string, archiveDir: string): Promise<CheckpointResult> {
  const rt = client.runtime;
  const pods: string[] = [];
  const archive = join(archiveDir, `bench-${process.pid}-${Date.now()}.tar`);
  const podDir = join(archiveDir, `bench-pod-${process.pid}-${Date.now()}`);
  const run = async (prefix: string) => {
    const config = benchPod(prefix, logRoot);
    const { pod_sandbox_id: id } = await rt.call('RunPodSandbox', { config });
    pods.push(id);
    return { id, config };
  };
  const remove = async (id: string) => {
    await rt.call('StopPodSandbox', { pod_sandbox_id: id });
    await rt.call('RemovePodSandbox', { pod_sandbox_id: id });
  };
  try {
    const source = await run('ckpt');
    const id = await startHolder(client, source, image);
    let t0 = now();
    await rt.call('CheckpointContainer', { container_id: id, location: archive, timeout: 300 });
    const checkpointMs = since(t0);
    const archiveMiB = (await stat(archive)).size / 2 ** 20;
    await holdsItsMemory(client, id, archiveMiB);
    await remove(source.id);

    const target = await run('rst');
    const restored = { ...benchContainer('holder', archive), command: [] };
    t0 = now();
    const { container_id: rid } = await rt.call('CreateContainer', { pod_sandbox_id: target.id, config: restored, sandbox_config: target.config });
    const restoreCreateMs = since(t0);
    const t1 = now();
    await rt.call('StartContainer', { container_id: rid });
    const restoreStartMs = since(t1);
    await running(client, rid);
    await remove(target.id);

    const podSource = await run('pckpt');
    const pid = await startHolder(client, podSource, image);
    await mkdir(podDir);
    t0 = now();
    await rt.call('CheckpointPod', { pod_sandbox_id: podSource.id, output_path: podDir, container_ids: [pid] }, { timeoutMs: 300_000 });
    const podCheckpointMs = since(t0);
    const podCheckpointMiB = await dirMiB(podDir);
    await holdsItsMemory(client, pid, podCheckpointMiB);
    await remove(podSource.id);
    t0 = now();
    const config = benchPod('prst', logRoot);
    const answer = await rt.call('RestorePod', {
      checkpoint_path: podDir, config, container_configs: [{ ...benchContainer('holder', image), command: HOLDER }],
    }, { timeoutMs: 300_000 });
    const podRestoreMs = since(t0);
    pods.push(answer.pod_sandbox_id);
    const restoredId = answer.restored_containers[0]!.container_id;
    const t2 = now();
    await rt.call('StartContainer', { container_id: restoredId });
    const podRestoreStartMs = since(t2);
    await running(client, restoredId);
    return {
      anonMiB: ANON_MIB, checkpointMs: round(checkpointMs), archiveMiB: round(archiveMiB), restoreCreateMs: round(restoreCreateMs),
      restoreStartMs: round(restoreStartMs), restoreMs: round(restoreCreateMs + restoreStartMs),
      podCheckpointMs: round(podCheckpointMs), podCheckpointMiB: round(podCheckpointMiB), podRestoreMs: round(podRestoreMs),
      podRestoreStartMs: round(podRestoreStartMs),
    };
  } finally {
    for (const id of pods) await rt.call('RemovePodSandbox', { pod_sandbox_id: id }).catch(() => undefined);
    await Promise.all([rm(archive, { force: true }), rm(podDir, { recursive: true, force: true })]);
  }
}

/** The holder, created and started in `pod`, once it has filled its memory. */
async function startHolder(client: CriClient, pod: { id: string; config: PodSandboxConfig }, image: string): Promise<string> {
  const holder = { ...benchContainer('holder', image), command: HOLDER };
  const { container_id: id } = await client.runtime.call('CreateContainer', { pod_sandbox_id: pod.id, config: holder, sandbox_config: pod.config });
  await client.runtime.call('StartContainer', { container_id: id });
  for (const deadline = Date.now() + 120_000; !(await ready(client, id));) {
    if (Date.now() > deadline) throw new Error(`the holder did not fill its ${ANON_MIB} MiB within 120 s`);
    await sleep(200);
  }
  return id;
}

/** A checkpoint smaller than the holder's memory did not catch it: said, with what the holder logged. */
async function holdsItsMemory(client: CriClient, id: string, mib: number): Promise<void> {
  if (mib >= ANON_MIB) return;
  const logPath = (await client.runtime.call('ContainerStatus', { container_id: id })).status?.log_path ?? '';
  const said = (await readFile(logPath, 'utf8').catch(() => '')).slice(0, 400);
  throw new Error(`the checkpoint is ${round(mib)} MiB: the holder's ${ANON_MIB} MiB are not in it (its log: ${said})`);
}

async function running(client: CriClient, id: string): Promise<void> {
  const state = (await client.runtime.call('ContainerStatus', { container_id: id })).status?.state;
  if (state !== 'CONTAINER_RUNNING') throw new Error(`the restored container is ${state}`);
}

async function dirMiB(dir: string): Promise<number> {
  let bytes = 0;
  for (const name of await readdir(dir, { recursive: true })) {
    const st = await stat(join(dir, name));
    if (st.isFile()) bytes += st.size;
  }
  return bytes / 2 ** 20;
}

/** The holder said it filled its memory (its log has "ready"). */
async function ready(client: CriClient, id: string): Promise<boolean> {
  const logPath = (await client.runtime.call('ContainerStatus', { container_id: id })).status?.log_path ?? '';
  return (await readFile(logPath, 'utf8').catch(() => '')).includes(' stdout F ready');
}
