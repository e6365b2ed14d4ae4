// `minicri doctor` and recovery at start share one inventory: every host object that belongs to minicri,
// held against the store. An object no record explains is an orphan (a leak); a record whose host object is
// gone is missing. Repair removes orphans: attachments through CNI DEL first, then what DEL could not release.
import { readdir, readFile, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { CniManager } from '../cni/manager.js';
import { cachedAttachmentIds, hostLocalReservations, portmapChains, removePortmapChain, removeReservation } from '../cni/inventory.js';
import { listPodNetns, netnsOwnerPrefix, removePodNetns } from '../netns/netns.js';
import { Images } from '../oci/image/images.js';
import type { ImageRecord } from '../oci/image/types.js';
import { listConmons } from '../oci/runtime/conmon.js';
import { unmountPodShm } from '../oci/runtime/pod/files.js';
import type { OciRuntime } from '../oci/runtime/runc.js';
import type { Config } from '../server/config.js';
import { openRuntimes } from '../server/runtimes.js';
import type { Logger } from '../core/log.js';
import { openTables, type Tables } from './records.js';
import { Store } from '../store/store.js';

/** What repairs use: the image service (root filesystems) and CNI (DEL of cached attachments). */
export interface RepairTools {
  images: Pick<Images, 'removeRootfs' | 'gc'>;
  cni: Pick<CniManager, 'gc'>;
}

export interface Finding {
  kind: 'netns' | 'runc' | 'conmon' | 'rootfs' | 'shm' | 'cni-attachment' | 'ip-reservation' | 'iptables-chain' | 'sandbox';
  object: string;
  /** The sandbox or container id the object belongs to, when it says. */
  owner?: string;
  status: 'ok' | 'orphan' | 'missing';
  repair?: (tools: RepairTools) => Promise<unknown>;
}

/** Where the inventory looks: the daemon's configuration, its records and its OCI runtimes. */
export interface InventorySource {
  config: Config;
  tables: Tables;
  runtimes: Map<string, OciRuntime>;
  log: Logger;
}

/** Mount points below `dir` (a daemon's state or rootfs directory). */
async function mountsBelow(dir: string): Promise<string[]> {
  const mounts = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').map((l) => l.split(' ')[4] ?? '');
  return mounts.filter((m) => m.startsWith(`${dir}/`));
}

export async function inventory(src: InventorySource): Promise<Finding[]> {
  const { config, tables } = src;
  const sandboxes = tables.sandboxes.list();
  const known = new Set([...sandboxes.map((s) => s.id), ...tables.containers.list().map((c) => c.id)]);
  // A pending teardown explains the network objects it is still releasing.
  const networked = new Set([...known, ...tables.teardowns.list().map((t) => t.id)]);
  const findings: Finding[] = [];
  const add = (kind: Finding['kind'], object: string, owner: string | undefined, ok: boolean, repair: (tools: RepairTools) => Promise<unknown>) =>
    findings.push({ kind, object, owner, status: ok ? 'ok' : 'orphan', ...(ok ? {} : { repair }) });

  const podDirs = [join(config.root_dir, 'sandboxes'), join(config.state_dir, 'sandboxes')];
  const cached = await cachedAttachmentIds(config.cni.cache_dir);
  const traces = [...networked, ...cached, ...(await Promise.all(podDirs.map((d) => readdir(d).catch(() => [] as string[])))).flat()];
  // Netns pins, host-local reservations and portmap chains live in places other runtimes (and other minicri
  // daemons, as in tests) share: one is ours only when this daemon left a trace of its sandbox (a record, a
  // pod directory, a CNI cache entry), so what another owns is never taken for our orphan and removed.
  const ours = (owner: string) => owner !== '' && traces.some((id) => id.startsWith(owner));

  const pinned = new Set(sandboxes.flatMap((s) => (s.netns ? [s.netns.path] : [])));
  const pins = await listPodNetns(config.netns_dir);
  for (const path of pins) {
    const owner = sandboxes.find((s) => s.netns?.path === path)?.id ?? netnsOwnerPrefix(path);
    if (ours(owner)) add('netns', path, owner, pinned.has(path), () => removePodNetns({ path }));
  }
  for (const s of sandboxes) {
    if (s.state === 'SANDBOX_READY' && s.netns && !pins.includes(s.netns.path)) findings.push({ kind: 'sandbox', object: `${s.id} netns ${s.netns.path}`, owner: s.id, status: 'missing' });
  }

  for (const [handler, runtime] of src.runtimes) {
    for (const id of await runtime.list().catch(() => [] as string[])) add('runc', `${handler}/${id}`, id, known.has(id), () => runtime.delete(id, { force: true }));
  }
  for (const { pid, id } of await listConmons(config.state_dir)) add('conmon', `pid ${pid}`, id, known.has(id), async () => process.kill(pid, 'SIGKILL'));

  const rootfsDir = join(config.root_dir, 'images', 'rootfs');
  for (const key of await readdir(rootfsDir).catch(() => [] as string[])) {
    add('rootfs', join(rootfsDir, key), key, known.has(key), ({ images }) => images.removeRootfs(key));
  }
  const shmDir = podDirs[1]!;
  for (const mount of await mountsBelow(shmDir)) {
    const id = mount.slice(shmDir.length + 1).split('/')[0]!;
    // The mount's directory is the pod's state directory: an unexplained one goes with it.
    add('shm', mount, id, known.has(id), async () => { await unmountPodShm(mount); await rm(dirname(mount), { recursive: true, force: true }); });
  }

  const attached = sandboxes.filter((s) => s.networkAttached).map((s) => s.id);
  for (const id of cached) {
    add('cni-attachment', `${config.cni.cache_dir}/results/*-${id}-*`, id, networked.has(id), ({ cni }) => cni.gc(attached));
  }
  for (const r of await hostLocalReservations(config.cni.conf_dir, src.log)) {
    if (ours(r.containerId)) add('ip-reservation', `${r.network} ${r.ip}`, r.containerId, networked.has(r.containerId), () => removeReservation(r));
  }
  for (const c of await portmapChains()) {
    if (ours(c.containerId)) add('iptables-chain', `nat ${c.chain}`, c.containerId, networked.has(c.containerId), () => removePortmapChain(c.chain));
  }
  return findings;
}

/** The inventory as `minicri doctor` takes it, from the store on disk (the daemon may be running or not). */
export async function examine(config: Config, log: Logger): Promise<Finding[]> {
  const store = Store.open(join(config.root_dir, 'minicri.db'));
  try {
    return await inventory({ config, tables: openTables(store), runtimes: await openRuntimes(config, log), log });
  } finally {
    store.close();
  }
}

/**
 * Removes every orphan, logging each, in an order where DEL runs before its leftovers are swept; returns
 * what failed. Layers only a removed root filesystem used are collected at the end.
 */
export async function repairOrphans(findings: Finding[], tools: RepairTools, log: Logger): Promise<string[]> {
  const order: Finding['kind'][] = ['conmon', 'runc', 'cni-attachment', 'ip-reservation', 'iptables-chain', 'netns', 'shm', 'rootfs'];
  const errors: string[] = [];
  let gcDone = false;
  for (const kind of order) {
    for (const f of findings.filter((x) => x.kind === kind && x.status === 'orphan')) {
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

/** `minicri doctor --repair`: opens the image service and CNI the daemon would use, and repairs. */
export async function repair(findings: Finding[], config: Config, log: Logger): Promise<string[]> {
  const store = Store.open(join(config.root_dir, 'minicri.db'));
  let cni: CniManager | undefined;
  try {
    const images = await Images.open({ rootDir: join(config.root_dir, 'images'), repo: store.table<ImageRecord>('image'), registries: { mirrors: {}, insecure: [] }, log });
    cni = await CniManager.create({ confDir: config.cni.conf_dir, binDirs: config.cni.bin_dirs, cacheDir: config.cni.cache_dir, log, watch: false });
    return await repairOrphans(findings, { images, cni }, log);
  } finally {
    cni?.close();
    store.close();
  }
}

export function formatFindings(findings: Finding[]): string {
  const rows = findings.map((f) => `${f.status.padEnd(8)} ${f.kind.padEnd(15)} ${f.object}${f.owner ? `  (${f.owner.slice(0, 12)})` : ''}`);
  const orphans = findings.filter((f) => f.status === 'orphan').length;
  const missing = findings.filter((f) => f.status === 'missing').length;
  return `${rows.join('\n')}${rows.length ? '\n' : ''}${findings.length} objects: ${orphans} orphaned, ${missing} missing\n`;
}
