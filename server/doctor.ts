// `minicri doctor`: the pod domain's inventory of host objects, taken from the store on disk (the daemon
// may be running or not), printed, and with --repair the orphans removed through the image service and
// CNI the daemon would use.
import { join } from 'node:path';
import { CniManager } from '../cni/manager.js';
import type { Logger } from '../core/log.js';
import { Images } from '../oci/image/images.js';
import { assertRootfsDirKept, storageDirs } from '../oci/image/storage-dirs.js';
import type { ImageRecord } from '../oci/image/types.js';
import { inventory, repairOrphans, type Finding } from '../pod/inventory.js';
import { openTables } from '../pod/records.js';
import { Store } from '../store/store.js';
import type { Config } from './config.js';
import { openRuntimes } from './runtimes.js';

export async function examine(config: Config, log: Logger): Promise<Finding[]> {
  const store = Store.open(join(config.root_dir, 'minicri.db'));
  try {
    return await inventory({ settings: config, tables: openTables(store), runtimes: await openRuntimes(config, log), log });
  } finally {
    store.close();
  }
}

export async function repair(findings: Finding[], config: Config, log: Logger): Promise<string[]> {
  const store = Store.open(join(config.root_dir, 'minicri.db'));
  let cni: CniManager | undefined;
  try {
    // The rootfs dir too: gc keeps the layers of the root filesystems it finds there.
    const dirs = storageDirs(config);
    await assertRootfsDirKept(store.getMeta('rootfs_dir'), dirs, config.root_dir);
    const images = await Images.open({
      rootDir: dirs.images, rootfsDir: dirs.rootfs, repo: store.table<ImageRecord>('image'), registries: { mirrors: {}, insecure: [] }, log,
    });
    cni = await CniManager.create({
      confDir: config.cni.conf_dir, binDirs: config.cni.bin_dirs, cacheDir: config.cni.cache_dir, networksDir: config.cni.networks_dir,
      log, watch: false,
    });
    return await repairOrphans(findings, { images, network: cni }, log);
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
