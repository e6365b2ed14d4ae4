// Recovery at start: make the store and the host agree again after a crash, a kill -9 or a reboot. Before
// the socket accepts calls, what answers depend on: containers that started or exited meanwhile, sandboxes
// whose pause died turn NOTREADY, network attachments whose namespace vanished (a reboot) are released through
// the CNI cache. Once it serves: operations cut off mid-way are undone or finished, then every host object of
// ours that no record explains is removed.
import { existsSync } from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../core/log.js';
import { pool } from '../core/locks.js';
import { Timeline } from '../core/timeline.js';
import { nowNanos } from '../core/time.js';
import { cgroupExists, podCgroupParentDir } from '../oci/runtime/cgroups.js';
import { listStagingEntries, usernsStagingEntry } from '../oci/runtime/userns.js';
import { CHECKPOINT_WORK_PREFIX, thawIfFrozen } from './container-checkpoint.js';
import { refreshContainer, runtimeFor } from './container-refresh.js';
import { finishContainerCleanupLocked, removeContainerLocked } from './container-remove.js';
import type { PodContext } from './context.js';
import { inventory, repairOrphans } from './inventory.js';
import { undoPodCheckpoint } from './pod-checkpoint.js';
import { tearDownNetwork } from './network.js';
import { attemptRemoval } from './removal.js';
import { removeSandboxLocked } from './sandbox-remove.js';
import { sandboxReservation } from './records.js';
import { markContainerLost, markContainerRunning, markSandboxNotReady } from './state.js';

/** How many objects recovery works on at once: each is independent of the others, and most of the time is processes'. */
const CONCURRENCY = 8;

/**
 * Runs one step for each item, several at once; a failure is logged and the rest go on (recovery must not
 * stop a start).
 */
async function each<T>(items: T[], log: Logger, what: (t: T) => string, step: (t: T) => Promise<unknown>): Promise<void> {
  await pool(items, CONCURRENCY, async (item) => {
    try {
      await step(item);
    } catch (err) {
      log.error({ err, item: what(item) }, 'recovery step failed; it is retried at the next start');
    }
  });
}

/** A creation the crash cut off, or a removal it interrupted: finished once the daemon serves, under its operation's locks. */
interface Leftover {
  id: string;
  /** The locks its operation takes, in that operation's order. */
  locks: string[];
  finish: () => Promise<unknown>;
}

/**
 * Containers first: a sandbox's removal takes its containers' locks, which a container's undo holds while
 * it waits for the sandbox's; done in this order, no leftover ever waits for one after it.
 */
function leftovers(ctx: PodContext, log: Logger): Leftover[] {
  const { sandboxes, containers, containerCleanups } = ctx.tables;
  const undo = (what: string, id: string, remove: () => Promise<void>) => async () => {
    log.warn({ [`${what}Id`]: id }, `${what} creation was cut off: undoing it`);
    await remove();
  };
  return [
    ...containers.list().filter((c) => c.creating).map((c) => ({
      id: c.id, locks: [c.sandboxId, c.id], finish: undo('container', c.id, () => removeContainerLocked(ctx, c.id, log)),
    })),
    ...containers.list().filter((c) => c.removing && !c.creating).map((c) => ({
      id: c.id, locks: [c.id], finish: () => attemptRemoval(containers, c.id, () => removeContainerLocked(ctx, c.id, log)),
    })),
    // A removed container's cleanup; one whose record is still in the table as well is redone just above.
    ...containerCleanups.list().filter((c) => !containers.get(c.id)).map((c) => ({
      id: c.id, locks: [c.id], finish: () => finishContainerCleanupLocked(ctx, c.id, log),
    })),
    ...sandboxes.list().filter((s) => s.creating).map((s) => ({
      id: s.id, locks: [sandboxReservation(s), s.id], finish: undo('sandbox', s.id, () => removeSandboxLocked(ctx, s.id, log)),
    })),
    // A RestorePod cut off after its sandbox was made: the pod goes whole, with the containers made in it.
    ...sandboxes.list().filter((s) => s.restoring && !s.creating).map((s) => ({
      id: s.id, locks: [s.id], finish: async () => {
        log.warn({ sandboxId: s.id }, 'a pod restore was cut off: removing the pod it made');
        await removeSandboxLocked(ctx, s.id, log);
      },
    })),
    ...sandboxes.list().filter((s) => s.removing && !s.creating).map((s) => ({
      id: s.id, locks: [s.id], finish: () => attemptRemoval(sandboxes, s.id, () => removeSandboxLocked(ctx, s.id, log)),
    })),
  ];
}

/** What recovery leaves to do once the daemon serves. */
export interface Recovered {
  /** Cut-off creations undone and interrupted removals finished (failures are logged and retried). */
  finished: Promise<void>;
}

export async function recover(ctx: PodContext, log: Logger): Promise<Recovered> {
  const { sandboxes, containers } = ctx.tables;
  const t = new Timeline();

  // Mounts staged for a user-namespaced creation live only until its `runc create`: what a cut-off creation
  // left, or an entry no record explains, goes (a live container's keeps its empty root dir).
  const live = (id: string) => { const r = sandboxes.get(id) ?? containers.get(id); return r !== undefined && !r.creating; };
  await t.step('unstage user namespace mounts', async () => each(await listStagingEntries(ctx.settings.state_dir), log, (id) => id, (id) =>
    ctx.host.unstageUserns(usernsStagingEntry(ctx.settings.state_dir, id), { keepRoot: live(id) })));
  // Undoing a cut-off creation (CNI DEL, unmounts, runc delete) is most of a restart's work mid-storm, and no
  // answer needs it done: such a record looks as a creation that failed looks while its undo runs, and its
  // locks are claimed before the socket opens, so a call about it (or a retried RunPodSandbox of the same pod)
  // waits for its end. The checks below leave these records to it.
  const pending = leftovers(ctx, log);
  const claims = pending.map((p) => Promise.all(p.locks.map((key) => ctx.locks.hold(key))));
  const later = new Set(pending.map((p) => p.id));
  const current = (r: { id: string; sandboxId?: string }) => !later.has(r.id) && !(r.sandboxId && later.has(r.sandboxId));

  // A CheckpointPod cut off left its containers frozen and its output half written: thawed and removed before serving.
  await t.step('pod checkpoints cut off', () =>
    each(ctx.tables.podCheckpoints.list(), log, (c) => c.id, (c) => undoPodCheckpoint(ctx, c, log)));

  // A start cut off after `runc start` left a running container recorded as created.
  await t.step('record cut-off starts', () =>
    each(containers.list().filter((c) => c.state === 'CONTAINER_CREATED' && current(c)), log, (c) => c.id, async (c) => {
      const state = await runtimeFor(ctx, c)?.state(c.id);
      if (state && state.status !== 'created') {
        log.warn({ containerId: c.id, status: state.status }, 'container was started while its start was cut off: recording it as started');
        // A restored one got its process (and pid) from `runc restore` only now.
        containers.update(c.id, (r) => {
          const { restoring: _, ...started } = markContainerRunning(r, nowNanos());
          return { ...started, pid: state.pid };
        });
      }
    }));

  // Exit files outlive the daemon: containers that exited meanwhile get their codes.
  await t.step('read exits', () =>
    each(containers.list().filter((c) => c.state === 'CONTAINER_RUNNING' && current(c)), log, (c) => c.id, async (c) => {
      const fresh = await refreshContainer(ctx, c);
      const runtime = runtimeFor(ctx, c);
      const state = fresh.state === 'CONTAINER_RUNNING' ? await runtime?.state(c.id) : undefined;
      if (fresh.state === 'CONTAINER_RUNNING' && runtime && !state) {
        // No exit file and no runc state: the host lost it (a reboot emptied /run).
        containers.update(c.id, (r) => markContainerLost(r, 'the container was lost while minicri was down (host reboot?)'));
      }
    }));

  // A checkpoint's work dir holds every memory page of its container: one a crash cut off goes now, not at removal.
  // It is made before the container is frozen and goes after the thaw, so its container may be frozen still: thawed.
  await t.step('checkpoint work dirs', () => each(containers.list().filter((c) => current(c)), log, (c) => c.id, async (c) => {
    const left = (await readdir(c.dir).catch(() => [] as string[])).filter((name) => name.startsWith(CHECKPOINT_WORK_PREFIX));
    const runtime = left.length > 0 && c.state === 'CONTAINER_RUNNING' ? runtimeFor(ctx, c) : undefined;
    if (runtime && await thawIfFrozen(runtime, c.id)) {
      log.warn({ containerId: c.id }, 'container was left frozen by a checkpoint cut off: thawed it');
    }
    for (const name of left) await rm(join(c.dir, name), { recursive: true, force: true });
    if (left.length > 0) log.warn({ containerId: c.id, removed: left }, 'removed the work dir of a checkpoint cut off');
  }));

  await t.step('pauses gone', () =>
    each(sandboxes.list().filter((s) => s.state === 'SANDBOX_READY' && current(s)), log, (s) => s.id, async (s) => {
      const state = await ctx.runtimes.get(s.runtimeHandler)?.state(s.id);
      if (!state || state.status !== 'running') {
        log.warn({ sandboxId: s.id }, 'the pause container is gone: sandbox is NOTREADY');
        sandboxes.update(s.id, markSandboxNotReady);
      }
    }));

  // An attachment whose namespace is gone (a reboot) still holds its IP: release it from the cache.
  await t.step('release networks of gone namespaces', () =>
    each(sandboxes.list().filter((s) => s.networkAttached && s.netns && current(s)), log, (s) => s.id, async (s) => {
      if (await ctx.host.netnsExists(s.netns!.path)) return;
      log.warn({ sandboxId: s.id }, 'network namespace is gone: releasing the pod network through the CNI cache');
      await tearDownNetwork(ctx, s);
      sandboxes.update(s.id, (r) => { r.networkAttached = false; });
    }));

  // CNI attachments in the cache that no sandbox explains go first (CNI GC, and DEL for older plugins).
  await t.step('cni gc', () =>
    each([sandboxes.list().filter((s) => s.networkAttached).map((s) => s.id)], log, () => 'cni gc', (valid) => ctx.network.gc(valid)));
  // A cgroup parent that no pod uses and that is gone from every hierarchy (kubelet removed the pod's) needs no more looking at.
  await t.step('forget what is gone', () => each([ctx], log, () => 'forgetting what is gone', async ({ settings, tables }) => {
    const used = new Set(tables.sandboxes.list().map((s) =>
      podCgroupParentDir(settings.cgroup_driver, s.config.linux?.cgroup_parent ?? '')));
    for (const parent of tables.cgroupParents.list()) {
      if (!used.has(parent.id) && !(await cgroupExists(parent.id))) tables.cgroupParents.delete(parent.id);
    }
    // So is a directory made for a mount that someone has since removed.
    for (const made of tables.hostPaths.list()) if (!existsSync(made.id)) tables.hostPaths.delete(made.id);
  }));
  log.info({ ms: t.ms, leftovers: pending.length }, 'recovery done');
  const finished = pool(pending, CONCURRENCY, async (p, i) => {
    const releases = await claims[i]!;
    try {
      await p.finish();
    } catch (err) {
      log.error({ err, item: p.id }, 'recovery step failed; it is retried by the background retry or at the next start');
    } finally {
      for (const release of releases) release();
    }
  }).then(() => log.info({ count: pending.length }, 'cut-off creations undone and removals finished'));
  return { finished };
}

/**
 * Whatever else no record explains (runc containers, conmons, cgroups, root filesystems, shm mounts, netns pins,
 * IP reservations and chains DEL could not release) goes, through doctor's inventory. This runs once the daemon
 * serves: these objects are no client's, so no answer depends on them, and a start does not wait for host-wide
 * listings (iptables, /proc, every cgroup hierarchy). Operations run meanwhile, so each object is held against
 * the records again right before it goes: a record is always written before the objects it explains are made.
 * Attachments in the CNI cache were collected before serving (recover), as a GC racing an ADD could free its IP.
 */
export async function sweepOrphans(ctx: PodContext, log: Logger): Promise<void> {
  const { settings, tables, runtimes, images, network } = ctx;
  const started = performance.now();
  try {
    const findings = (await inventory({ settings, tables, runtimes, log })).filter((f) => f.kind !== 'cni-attachment');
    const explained = (owner: string | undefined) => owner !== undefined
      && [tables.sandboxes, tables.containers, tables.containerCleanups, tables.teardowns]
        .some((table) => table.get(owner) !== undefined || table.list().some((r) => r.id.startsWith(owner)));
    for (const error of await repairOrphans(findings, { images, network }, log, (f) => !explained(f.owner))) {
      log.error({ error }, 'removing an unexplained host object failed; it is retried at the next start');
    }
  } catch (err) {
    log.error({ err }, 'the sweep of unexplained host objects failed; it runs again at the next start');
  }
  log.info({ ms: Math.round(performance.now() - started) }, 'sweep of unexplained host objects done');
}
