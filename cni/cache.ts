// Attachment cache in libcni's on-disk layout (<cacheDir>/results/<network>-<containerId>-<ifName>,
// kind "cniCacheV1"), so DEL after a restart or config change replays what ADD used, and other
// CNI tooling can read it.
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { writeFileAtomic } from '../core/fs.js';
import { isObject } from './config.js';

export const CACHE_KIND = 'cniCacheV1';

export interface CachedAttachment {
  kind: typeof CACHE_KIND;
  containerId: string;
  /** base64 of the exact network list bytes ADD ran with. */
  config: string;
  ifName: string;
  networkName: string;
  netns?: string;
  cniArgs?: [string, string][];
  capabilityArgs?: Record<string, unknown>;
  result?: Record<string, unknown>;
  /** When ADD finished (ms since the epoch, fractional): a pod's attachments are DELeted newest first. */
  attachedAt?: number;
}

/** Checks a cache file's parsed content; undefined for anything that is not a usable entry. */
export function parseCacheEntry(json: unknown): CachedAttachment | undefined {
  if (!isObject(json) || json.kind !== CACHE_KIND) return undefined;
  const { containerId, config, ifName, networkName } = json;
  if (typeof containerId !== 'string' || typeof config !== 'string' || typeof ifName !== 'string' || typeof networkName !== 'string') {
    return undefined;
  }
  if (!containerId || !ifName || !networkName) return undefined;
  return json as unknown as CachedAttachment;
}

export class ResultCache {
  readonly dir: string;

  constructor(cacheDir: string) {
    this.dir = path.join(cacheDir, 'results');
  }

  file(network: string, containerId: string, ifName: string): string {
    return path.join(this.dir, `${network}-${containerId}-${ifName}`);
  }

  /** Written atomically (temp file + rename), readable by root only, as libcni does. */
  async write(entry: CachedAttachment): Promise<void> {
    await fs.mkdir(this.dir, { recursive: true, mode: 0o700 });
    await writeFileAtomic(this.file(entry.networkName, entry.containerId, entry.ifName), JSON.stringify(entry));
  }

  /** Drops temp files a write cut off before its rename left (a crash mid-write); call before use. */
  async removeStaleTemps(): Promise<void> {
    const names = await fs.readdir(this.dir).catch(() => [] as string[]);
    await Promise.all(names.filter((n) => n.startsWith('.tmp-')).map((n) => fs.rm(path.join(this.dir, n), { force: true })));
  }

  async remove(network: string, containerId: string, ifName: string): Promise<void> {
    await fs.rm(this.file(network, containerId, ifName), { force: true });
  }

  /** Every valid entry, or only those of one container; unreadable or foreign files are skipped. */
  async list(containerId?: string): Promise<CachedAttachment[]> {
    let names: string[];
    try {
      names = (await fs.readdir(this.dir)).sort();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
    const out: CachedAttachment[] = [];
    for (const name of names) {
      if (name.startsWith('.')) continue;
      if (containerId !== undefined && !name.includes(`-${containerId}-`)) continue;
      let entry: CachedAttachment | undefined;
      try {
        entry = parseCacheEntry(JSON.parse(await fs.readFile(path.join(this.dir, name), 'utf8')));
      } catch {
        continue;
      }
      if (entry && (containerId === undefined || entry.containerId === containerId)) out.push(entry);
    }
    return out;
  }
}
