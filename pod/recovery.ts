// Recovery at start, before the socket accepts calls: make the store and the host agree again after a
// crash, a kill -9 or a reboot. Operations cut off mid-way are undone; sandboxes whose pause died turn
// NOTREADY; network attachments whose namespace vanished (a reboot) are released through the CNI
// cache; every host object of ours that no record explains is removed.
import { existsSync } from 'node:fs';
import type { Logger } from '../core/log.js';
import { pool } from '../core/pool.js';
import { Timeline } from '../core/timeline.js';
import { nowNanos } from '../core/time.js';
import { cgroupExists, podCgroupParentDir } from '../oci/runtime/cgroups.js';
import { listStagingEntries, usernsStagingEntry } from '../oci/runtime/userns.js';
import { refreshContainer, runtimeFor } from './container-refresh.js';
import { removeContainerLocked } from './container-remove.js';
import type { PodContext } from './context.js';
import { inventory, repairOrphans } from './inventory.js';
import { tearDownNetwork } from './network.js';
import { attemptRemoval } from './removal.js';
import { removeSandboxLocked } from './sandbox-remove.js';
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

export async function recover(ctx: PodContext, log: Logger): Promise<void> {
  const { sandboxes, containers } = ctx.tables;
  const t = new Timeline();

  // Mounts staged for a user-namespaced creation live only until its `runc create`: what a cut-off creation
  // left, or an entry no record explains, goes (a live container's keeps its empty root dir).
  const live = (id: string) => { const r = sandboxes.get(id) ?? containers.get(id); return r !== undefined && !r.creating; };
  await t.step('unstage user namespace mounts', async () => each(await listStagingEntries(ctx.settings.state_dir), log, (id) => id, (id) =>
    ctx.host.unstageUserns(usernsStagingEntry(ctx.settings.state_dir, id), { keepRoot: live(id) })));
  await t.step('undo cut-off container creations', () => each(containers.list().filter((c) => c.creating), log, (c) => c.id, async (c) => {
    log.warn({ containerId: c.id }, 'container creation was cut off: undoing it');
    await removeContainerLocked(ctx, c.id, log);
  }));
  await t.step('undo cut-off sandbox creations', () => each(sandboxes.list().filter((s) => s.creating), log, (s) => s.id, async (s) => {
    log.warn({ sandboxId: s.id }, 'sandbox creation was cut off: undoing it');
    await removeSandboxLocked(ctx, s.id, log);
  }));

  // Removals that failed or were cut off are finished now.
  await t.step('finish container removals', () => each(containers.list().filter((c) => c.removing), log, (c) => c.id, (c) => attemptRemoval(containers, c.id, () => removeContainerLocked(ctx, c.id, log))));
  await t.step('finish sandbox removals', () => each(sandboxes.list().filter((s) => s.removing), log, (s) => s.id, (s) => attemptRemoval(sandboxes, s.id, () => removeSandboxLocked(ctx, s.id, log))));

  // A start cut off after `runc start` left a running container recorded as created.
  await t.step('record cut-off starts', () => each(containers.list().filter((c) => c.state === 'CONTAINER_CREATED'), log, (c) => c.id, async (c) => {
    const state = await runtimeFor(ctx, c)?.state(c.id);
    if (state && state.status !== 'created') {
      log.warn({ containerId: c.id, status: state.status }, 'container was started while its start was cut off: recording it as started');
      containers.update(c.id, (r) => markContainerRunning(r, nowNanos()));
    }
  }));

  // Exit files outlive the daemon: containers that exited meanwhile get their codes.
  await t.step('read exits', () => each(containers.list().filter((c) => c.state === 'CONTAINER_RUNNING'), log, (c) => c.id, async (c) => {
    const fresh = await refreshContainer(ctx, c);
    const runtime = runtimeFor(ctx, c);
    if (fresh.state === 'CONTAINER_RUNNING' && runtime && !(await runtime.state(c.id))) {
      // No exit file and no runc state: the host lost it (a reboot emptied /run).
      containers.update(c.id, (r) => markContainerLost(r, 'the container was lost while minicri was down (host reboot?)'));
    }
  }));

  await t.step('pauses gone', () => each(sandboxes.list().filter((s) => s.state === 'SANDBOX_READY'), log, (s) => s.id, async (s) => {
    const state = await ctx.runtimes.get(s.runtimeHandler)?.state(s.id);
    if (!state || state.status !== 'running') {
      log.warn({ sandboxId: s.id }, 'the pause container is gone: sandbox is NOTREADY');
      sandboxes.update(s.id, markSandboxNotReady);
    }
  }));

  // An attachment whose namespace is gone (a reboot) still holds its IP: release it from the cache.
  await t.step('release networks of gone namespaces', () => each(sandboxes.list().filter((s) => s.networkAttached && s.netns), log, (s) => s.id, async (s) => {
    if (await ctx.host.netnsExists(s.netns!.path)) return;
    log.warn({ sandboxId: s.id }, 'network namespace is gone: releasing the pod network through the CNI cache');
    await tearDownNetwork(ctx, s);
    sandboxes.update(s.id, (r) => { r.networkAttached = false; });
  }));

  // CNI attachments in the cache that no sandbox explains go first (CNI GC, and DEL for older plugins).
  await t.step('cni gc', () => each([sandboxes.list().filter((s) => s.networkAttached).map((s) => s.id)], log, () => 'cni gc', (valid) => ctx.network.gc(valid)));
  // A cgroup parent that no pod uses and that is gone from every hierarchy (kubelet removed the pod's) needs no more looking at.
  await t.step('forget what is gone', () => each([ctx], log, () => 'forgetting what is gone', async ({ settings, tables }) => {
    const used = new Set(tables.sandboxes.list().map((s) => podCgroupParentDir(settings.cgroup_driver, s.config.linux?.cgroup_parent ?? '')));
    for (const parent of tables.cgroupParents.list()) {
      if (!used.has(parent.id) && !(await cgroupExists(parent.id))) tables.cgroupParents.delete(parent.id);
    }
    // So is a directory made for a mount that someone has since removed.
    for (const made of tables.hostPaths.list()) if (!existsSync(made.id)) tables.hostPaths.delete(made.id);
  }));
  log.info({ ms: t.ms }, 'recovery done');
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
    const explained = (owner: string | undefined) => owner !== undefined && [tables.sandboxes, tables.containers, tables.teardowns]
      .some((table) => table.get(owner) !== undefined || table.list().some((r) => r.id.startsWith(owner)));
    for (const error of await repairOrphans(findings, { images, network }, log, (f) => !explained(f.owner))) {
      log.error({ error }, 'removing an unexplained host object failed; it is retried at the next start');
    }
  } catch (err) {
    log.error({ err }, 'the sweep of unexplained host objects failed; it runs again at the next start');
  }
  log.info({ ms: Math.round(performance.now() - started) }, 'sweep of unexplained host objects done');
}
