// `minicri doctor`: every host object that belongs to minicri, held against the store. An object no
// record explains is an orphan (a leak); a record whose host object is gone is missing. With repair,
// orphans are removed: attachments through CNI DEL first, then what DEL could not release.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CniManager } from '../cni/manager.js';
import { cachedAttachmentIds, hostLocalReservations, portmapChains, removePortmapChain, removeReservation } from '../cni/inventory.js';
import { listPodNetns, netnsOwnerPrefix, removePodNetns } from '../netns/netns.js';
import { Images } from '../oci/image/images.js';
import type { ImageRecord } from '../oci/image/types.js';
import { listConmons } from '../oci/runtime/conmon.js';
import { unmountPodShm } from '../oci/runtime/pod/files.js';
import type { Config } from './config.js';
import { openRuntimes } from './runtimes.js';
import type { Logger } from './log.js';
import { openTables } from './records.js';
import { Store } from './store.js';

export interface Finding {
  kind: 'netns' | 'runc' | 'conmon' | 'rootfs' | 'shm' | 'cni-attachment' | 'ip-reservation' | 'iptables-chain' | 'sandbox';
  object: string;
  /** The sandbox or container id the object belongs to, when it says. */
  owner?: string;
  status: 'ok' | 'orphan' | 'missing';
  repair?: (images: Images) => Promise<unknown>;
}

/** Mount points below `dir` (a daemon's state or rootfs directory). */
async function mountsBelow(dir: string): Promise<string[]> {
  const mounts = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').map((l) => l.split(' ')[4] ?? '');
  return mounts.filter((m) => m.startsWith(`${dir}/`));
}

export async function examine(config: Config, log: Logger): Promise<Finding[]> {
  const store = Store.open(join(config.root_dir, 'minicri.db'));
  const tables = openTables(store);
  const sandboxes = tables.sandboxes.list();
  const known = new Set([...sandboxes.map((s) => s.id), ...tables.containers.list().map((c) => c.id)]);
  const findings: Finding[] = [];
  const add = (kind: Finding['kind'], object: string, owner: string | undefined, ok: boolean, repair: (images: Images) => Promise<unknown>) =>
    findings.push({ kind, object, owner, status: ok ? 'ok' : 'orphan', ...(ok ? {} : { repair }) });

  const pinned = new Set(sandboxes.flatMap((s) => (s.netns ? [s.netns.path] : [])));
  const pins = await listPodNetns(config.netns_dir);
  for (const path of pins) add('netns', path, sandboxes.find((s) => s.netns?.path === path)?.id ?? netnsOwnerPrefix(path), pinned.has(path), () => removePodNetns({ path }));
  for (const s of sandboxes) {
    if (s.state === 'SANDBOX_READY' && s.netns && !pins.includes(s.netns.path)) findings.push({ kind: 'sandbox', object: `${s.id} netns ${s.netns.path}`, owner: s.id, status: 'missing' });
  }

  for (const [handler, runtime] of await openRuntimes(config, log)) {
    for (const id of await runtime.list().catch(() => [] as string[])) add('runc', `${handler}/${id}`, id, known.has(id), () => runtime.delete(id, { force: true }));
  }
  for (const { pid, id } of await listConmons(config.state_dir)) add('conmon', `pid ${pid}`, id, known.has(id), async () => process.kill(pid, 'SIGKILL'));

  const rootfsDir = join(config.root_dir, 'images', 'rootfs');
  for (const key of await readdir(rootfsDir).catch(() => [] as string[])) {
    add('rootfs', join(rootfsDir, key), key, known.has(key), (images) => images.removeRootfs(key));
  }
  for (const mount of await mountsBelow(join(config.state_dir, 'sandboxes'))) {
    const id = mount.slice(join(config.state_dir, 'sandboxes').length + 1).split('/')[0]!;
    add('shm', mount, id, known.has(id), () => unmountPodShm(mount));
  }

  const attached = new Set(sandboxes.filter((s) => s.networkAttached).map((s) => s.id));
  for (const id of await cachedAttachmentIds(config.cni.cache_dir)) {
    add('cni-attachment', `${config.cni.cache_dir}/results/*-${id}-*`, id, known.has(id), async () => {
      const cni = await CniManager.create({ confDir: config.cni.conf_dir, binDirs: config.cni.bin_dirs, cacheDir: config.cni.cache_dir, log, watch: false });
      try { await cni.gc([...attached]); } finally { cni.close(); }
    });
  }
  for (const r of await hostLocalReservations(config.cni.conf_dir, log)) add('ip-reservation', `${r.network} ${r.ip}`, r.containerId, known.has(r.containerId), () => removeReservation(r));
  for (const c of await portmapChains()) add('iptables-chain', `nat ${c.chain}`, c.containerId, known.has(c.containerId), () => removePortmapChain(c.chain));

  store.close();
  return findings;
}

/** Removes every orphan, in an order where DEL runs before its leftovers are swept. */
export async function repair(findings: Finding[], config: Config, log: Logger): Promise<string[]> {
  const order: Finding['kind'][] = ['conmon', 'runc', 'cni-attachment', 'ip-reservation', 'iptables-chain', 'netns', 'shm', 'rootfs'];
  const errors: string[] = [];
  const done = new Set<string>();
  const store = Store.open(join(config.root_dir, 'minicri.db'));
  try {
    const images = await Images.open({ rootDir: join(config.root_dir, 'images'), repo: store.table<ImageRecord>('image'), registries: { mirrors: {}, insecure: [] }, log });
    for (const kind of order) {
      for (const f of findings.filter((x) => x.kind === kind && x.status === 'orphan')) {
        // One CNI GC serves every orphaned attachment.
        if (kind === 'cni-attachment' && done.has(kind)) continue;
        done.add(kind);
        try {
          await f.repair?.(images);
        } catch (err) {
          errors.push(`${f.kind} ${f.object}: ${(err as Error).message}`);
        }
      }
    }
    // Layers only a removed root filesystem used can go now.
    await images.gc();
  } finally {
    store.close();
  }
  return errors;
}

export function formatFindings(findings: Finding[]): string {
  const rows = findings.map((f) => `${f.status.padEnd(8)} ${f.kind.padEnd(15)} ${f.object}${f.owner ? `  (${f.owner.slice(0, 12)})` : ''}`);
  const orphans = findings.filter((f) => f.status === 'orphan').length;
  const missing = findings.filter((f) => f.status === 'missing').length;
  return `${rows.join('\n')}${rows.length ? '\n' : ''}${findings.length} objects: ${orphans} orphaned, ${missing} missing\n`;
}
