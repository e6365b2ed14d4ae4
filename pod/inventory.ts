// `minicri doctor` and recovery at start share one inventory: every host object that belongs to minicri,
// held against the store. An object no record explains is an orphan (a leak); a record whose host object is
// gone is missing. Repair removes orphans: attachments through CNI DEL first, then what DEL could not release.
import { existsSync } from 'node:fs';
import { readdir, readFile, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Logger } from '../core/log.js';
import { cachedAttachmentIds, hostLocalReservations, portmapChains, removePortmapChain, removeReservation } from '../cni/inventory.js';
import { listPodNetns, netnsOwnerPrefix, removePodNetns } from '../netns/netns.js';
import { storageDirs } from '../oci/image/storage-dirs.js';
import { cgroupHierarchies, containerCgroupsBelow, removeCgroupDir } from '../oci/runtime/cgroups.js';
import { listConmons } from '../oci/runtime/conmon.js';
import { unmountPodShm } from '../oci/runtime/pod/files.js';
import { podUserNamespace } from '../oci/runtime/spec/index.js';
import { listStagingEntries, processUidMap, unstageMounts, usernsStagingEntry } from '../oci/runtime/userns.js';
import type { PodSettings } from './context.js';
import type { ContainerRuntime, PodImages, PodNetwork } from './interfaces.js';
import type { Tables } from './records.js';

/** What repairs use: the image service (root filesystems) and CNI (DEL of cached attachments). */
export interface RepairTools {
  images: Pick<PodImages, 'removeRootfs' | 'gc'>;
  network: Pick<PodNetwork, 'gc'>;
}

export interface Finding {
  kind:
    | 'netns' | 'runc' | 'conmon' | 'cgroup' | 'rootfs' | 'shm' | 'cni-attachment' | 'ip-reservation' | 'iptables-chain' | 'host-path'
    | 'sandbox'
    | 'userns-staging' | 'userns';
  object: string;
  /** The sandbox or container id the object belongs to, when it says. */
  owner?: string;
  status: 'ok' | 'orphan' | 'missing';
  repair?: (tools: RepairTools) => Promise<unknown>;
}

/** Where the inventory looks: the daemon's settings, its records and its OCI runtimes. */
export interface InventorySource {
  settings: PodSettings;
  tables: Tables;
  runtimes: Map<string, Pick<ContainerRuntime, 'list' | 'delete'>>;
  log: Logger;
}

/** Mount points below `dir` (a daemon's state or rootfs directory). */
async function mountsBelow(dir: string): Promise<string[]> {
  const mounts = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').map((l) => l.split(' ')[4] ?? '');
  return mounts.filter((m) => m.startsWith(`${dir}/`));
}

export async function inventory(src: InventorySource): Promise<Finding[]> {
  const { settings, tables } = src;
  const sandboxes = tables.sandboxes.list();
  // A removed container's objects are explained by its cleanup record until that cleanup has run.
  const containers = [...tables.containers.list(), ...tables.containerCleanups.list()];
  const known = new Set([...sandboxes.map((s) => s.id), ...containers.map((c) => c.id)]);
  // A shared image volume view is explained by any container using it.
  const imageVolumeKeys = new Set(containers.flatMap((c) => (c.imageVolumes ?? []).map((u) => u.key)));
  // A pending teardown explains the network objects it is still releasing.
  const networked = new Set([...known, ...tables.teardowns.list().map((t) => t.id)]);
  const findings: Finding[] = [];
  const add = (
    kind: Finding['kind'], object: string, owner: string | undefined, ok: boolean, repair: (tools: RepairTools) => Promise<unknown>,
  ) =>
    findings.push({ kind, object, owner, status: ok ? 'ok' : 'orphan', ...(ok ? {} : { repair }) });

  const podDirs = [join(settings.root_dir, 'sandboxes'), join(settings.state_dir, 'sandboxes')];
  const cached = await cachedAttachmentIds(settings.cni.cache_dir);
  const traces = [...networked, ...cached, ...(await Promise.all(podDirs.map((d) => readdir(d).catch(() => [] as string[])))).flat()];
  // Netns pins, host-local reservations and portmap chains live in places other runtimes (and other minicri
  // daemons, as in tests) share: one is ours only when this daemon left a trace of its sandbox (a record, a
  // pod directory, a CNI cache entry), so what another owns is never taken for our orphan and removed.
  const ours = (owner: string) => owner !== '' && traces.some((id) => id.startsWith(owner));

  const pinned = new Set(sandboxes.flatMap((s) => (s.netns ? [s.netns.path] : [])));
  const pins = await listPodNetns(settings.netns_dir);
  for (const path of pins) {
    const owner = sandboxes.find((s) => s.netns?.path === path)?.id ?? netnsOwnerPrefix(path);
    if (ours(owner)) add('netns', path, owner, pinned.has(path), () => removePodNetns({ path }));
  }
  for (const s of sandboxes) {
    if (s.state === 'SANDBOX_READY' && s.netns && !pins.includes(s.netns.path)) {
      findings.push({ kind: 'sandbox', object: `${s.id} netns ${s.netns.path}`, owner: s.id, status: 'missing' });
    }
  }

  for (const [handler, runtime] of src.runtimes) {
    for (const id of await runtime.list().catch(() => [] as string[])) {
      add('runc', `${handler}/${id}`, id, known.has(id), () => runtime.delete(id, { force: true }));
    }
  }
  for (const { pid, id } of await listConmons(settings.state_dir)) {
    add('conmon', `pid ${pid}`, id, known.has(id), async () => process.kill(pid, 'SIGKILL'));
  }
  for (const c of await podCgroups(tables)) {
    // An unexplained cgroup that still holds processes may be another runtime's on a shared parent: only empty ones are ours to judge.
    if (known.has(c.owner) || c.empty) add('cgroup', c.relative, c.owner, known.has(c.owner), () => removeCgroupDir(c.relative));
  }

  const rootfsDir = storageDirs(settings).rootfs;
  for (const key of await readdir(rootfsDir).catch(() => [] as string[])) {
    add('rootfs', join(rootfsDir, key), key, known.has(key) || imageVolumeKeys.has(key), ({ images }) => images.removeRootfs(key));
  }
  const shmDir = podDirs[1]!;
  for (const mount of await mountsBelow(shmDir)) {
    const id = mount.slice(shmDir.length + 1).split('/')[0]!;
    // The mount's directory is the pod's state directory: an unexplained one goes with it.
    add('shm', mount, id, known.has(id), async () => {
      await unmountPodShm(mount);
      await rm(dirname(mount), { recursive: true, force: true });
    });
  }

  // A user-namespaced sandbox's or container's staging entry: explained by its record.
  for (const id of await listStagingEntries(settings.state_dir)) {
    const entry = usernsStagingEntry(settings.state_dir, id);
    add('userns-staging', entry, id, known.has(id), () => unstageMounts(entry));
  }
  // A user-namespaced pod's pause must hold the mappings its record says.
  for (const s of sandboxes.filter((x) => x.state === 'SANDBOX_READY' && x.pausePid)) {
    let userns;
    try { userns = podUserNamespace(s.config); } catch { continue; }
    if (!userns) continue;
    const want = userns.uids.map((r) => `${r.containerId}:${r.hostId}:${r.size}`).join(',');
    const have = (await processUidMap(s.pausePid!))?.map((r) => `${r.containerId}:${r.hostId}:${r.size}`).join(',');
    const gids = userns.gids.map((r) => `${r.containerId}:${r.hostId}:${r.size}`).join(',');
    const object = `${s.id} uids ${want}, gids ${gids}${have === want ? '' : ` (pause has ${have ?? 'no process'})`}`;
    findings.push({ kind: 'userns', object, owner: s.id, status: have === want ? 'ok' : 'missing' });
  }

  const attached = sandboxes.filter((s) => s.networkAttached).map((s) => s.id);
  for (const id of cached) {
    add('cni-attachment', `${settings.cni.cache_dir}/results/*-${id}-*`, id, networked.has(id), ({ network }) => network.gc(attached));
  }
  for (const r of await hostLocalReservations(settings.cni.conf_dir, settings.cni.networks_dir, src.log)) {
    if (ours(r.containerId)) {
      add('ip-reservation', `${r.network} ${r.ip}`, r.containerId, networked.has(r.containerId), () => removeReservation(r));
    }
  }
  for (const c of await portmapChains()) {
    if (ours(c.containerId)) {
      add('iptables-chain', `nat ${c.chain}`, c.containerId, networked.has(c.containerId), () => removePortmapChain(c.chain));
    }
  }
  // Directories made for mounts whose source was missing stay, as they do under containerd and CRI-O: listed, never repaired.
  for (const made of tables.hostPaths.list()) {
    if (existsSync(made.id)) {
      findings.push({ kind: 'host-path', object: `${made.id} (made for a mount; kept)`, owner: made.containerId, status: 'ok' });
    }
  }
  return findings;
}

/** The cgroups named by a sandbox or container id in the parents this daemon used, one per path (all hierarchies). */
async function podCgroups(tables: Tables): Promise<{ relative: string; owner: string; empty: boolean }[]> {
  const hierarchies = await cgroupHierarchies();
  const byPath = new Map<string, { relative: string; owner: string; empty: boolean }>();
  for (const parent of tables.cgroupParents.list()) {
    for (const c of await containerCgroupsBelow(parent.id, hierarchies)) {
      const seen = byPath.get(c.relative);
      byPath.set(c.relative, { relative: c.relative, owner: c.owner, empty: c.empty && (seen?.empty ?? true) });
    }
  }
  return [...byPath.values()];
}

/**
 * Removes every orphan, logging each, in an order where DEL runs before its leftovers are swept; returns
 * what failed. `stillOrphan` is asked right before each removal (records may have changed since the
 * inventory). Layers only a removed root filesystem used are collected at the end.
 */
export async function repairOrphans(
  findings: Finding[],
  tools: RepairTools,
  log: Logger,
  stillOrphan: (f: Finding) => boolean = () => true,
): Promise<string[]> {
  const order: Finding['kind'][] = [
    'userns-staging', 'conmon', 'runc', 'cgroup', 'cni-attachment', 'ip-reservation', 'iptables-chain', 'netns', 'shm', 'rootfs',
  ];
  const errors: string[] = [];
  let gcDone = false;
  for (const kind of order) {
    for (const f of findings.filter((x) => x.kind === kind && x.status === 'orphan')) {
      if (!stillOrphan(f)) continue;
      log.warn({ kind: f.kind, object: f.object, owner: f.owner }, 'removing a host object no record explains');
      // One CNI GC serves every orphaned attachment.
      if (kind === 'cni-attachment' && gcDone) continue;
      gcDone ||= kind === 'cni-attachment';
      try {
        await f.repair?.(tools);
      } catch (err) {
        errors.push(`${f.kind} ${f.object}: ${(err as Error).message}`);
      }
    }
  }
  if (findings.some((f) => f.kind === 'rootfs' && f.status === 'orphan')) await tools.images.gc();
  return errors;
}
