// The image catalogue: image records and their lookups; pulls (each run by a Pull, pull.ts) and local imports (the
// pause image) committed as records; removal, container root filesystems, disk usage, and collecting what nothing uses.
import { chmod, mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import tar from 'tar-stream';
import { causeWhere, FailedPrecondition, InvalidArgument, NotFound, ResourceExhausted } from '../../core/errors.js';
import { Mutex, Semaphore, SingleFlight } from '../../core/locks.js';
import type { Logger } from '../../core/log.js';
import { ContentStore, digestOf } from './content.js';
import type { Transport } from './http.js';
import { Leases, type PullIntentRepository } from './lease.js';
import { DEFAULT_CONCURRENT_DOWNLOADS, type RegistryLimits } from './limits.js';
import { buildImageConfig, buildImageManifest, MediaType } from './manifest.js';
import { HOST_PLATFORM } from './platform.js';
import { Pull, type PullContext, type PulledImage } from './pull.js';
import { formatReference, parseReference, refName, type ImageRef } from './reference.js';
import { RegistryClient } from './registry.js';
import { LayerStore, type Rootfs, type RootfsOptions } from './snapshot.js';
import { keepUnpackWorkers } from './unpack-pool.js';
import { diskUsage } from './usage.js';
import { warmUpPull } from './warm-up.js';
import type { AuthConfig, ImageConfig, ImageRecord, ImageRepository, RegistryHostsConfig } from './types.js';

/** The record type of `ImagesOptions.pulls`, for the daemon's state store. */
export type { PullIntent } from './lease.js';

export interface ImagesOptions {
  /** Everything lives under here: blobs/, layers/, l/, rootfs/, tmp/. */
  rootDir: string;
  /** Where containers' root filesystems (their writable layers) live instead of <rootDir>/rootfs. */
  rootfsDir?: string;
  repo: ImageRepository;
  registries: RegistryHostsConfig;
  log: Logger;
  /** Who uses the image (a container, a pause), said with what to do about it: such an image cannot be removed. */
  usedBy?: (imageId: string) => string | undefined;
  /** Layers downloaded (and unpacked) at once, across all pulls (default DEFAULT_CONCURRENT_DOWNLOADS). */
  maxConcurrentDownloads?: number;
  /** For tests that watch requests; defaults to undici's request. */
  transport?: Transport;
  /** Where pulls record their intent (the daemon's state store); without it a crash is still cleaned up, unlogged. */
  pulls?: PullIntentRepository;
  /** A blob download that receives no byte for this long fails over to the next endpoint (default 60 s). */
  stallTimeoutMs?: number;
  /** How often a running pull logs its progress (default 10 s). */
  progressIntervalMs?: number;
  /** How old the writable layers' usage ImageFsInfo answers may be (default 10 s). */
  writableUsageMaxAgeMs?: number;
  /** What a pull reads of a registry's answers at most (default DEFAULT_REGISTRY_LIMITS). */
  limits?: Partial<RegistryLimits>;
  /**
   * Keep each pulled layer's compressed blob beside its unpacked layer (default false): nothing in a node reads
   * them again, and writing them costs a pull, and the disk, the layers' compressed size again.
   */
  keepLayerBlobs?: boolean;
}

/** A file of a locally built image: content from a host file or given bytes; or an empty directory. */
export interface LocalFile {
  /** Absolute path inside the image. */
  path: string;
  source?: string;
  data?: Buffer | string;
  mode?: number;
  directory?: boolean;
}

export interface FsInfo { mountpoint: string; usedBytes: number; inodesUsed: number; timestamp: number }

const ID_RE = /^(?:sha256:)?([a-f0-9]{64})$/;
const ID_PREFIX_RE = /^(?:sha256:)?([a-f0-9]{12,63})$/;

/**
 * A pull's failure as RESOURCE_EXHAUSTED when a full disk (ENOSPC) or a used-up disk quota (EDQUOT) is behind it
 * (itself or a cause), naming where; else `err` as it is. Pure.
 */
export function pullSpaceError(err: unknown, rootDir: string, image: string): unknown {
  const full = causeWhere(err, (e) => e.code === 'ENOSPC' || e.code === 'EDQUOT');
  if (!full) return err;
  const where = full.path ?? rootDir;
  const [what, fix] = full.code === 'EDQUOT'
    ? ['the disk quota is used up on the device holding', 'raise the quota, free space there']
    : ['no space left on the device holding', 'free space there'];
  return new ResourceExhausted(`${what} ${where} while pulling "${image}": ${fix} or move root_dir to a larger filesystem`, { cause: err });
}

/** uid or username from an image config's User ("1000", "1000:1000", "nobody", "nobody:nogroup"). */
export function imageUser(user: string): { uid?: number; username?: string } {
  const name = user.split(':')[0] ?? '';
  if (name === '') return {};
  if (/^\d+$/.test(name)) return { uid: Number(name) };
  return { username: name };
}

/** What the pull metrics read: bytes received from registries since start, pulls running now. */
export interface PullStats { bytes: number; inFlight: number }

export class Images {
  private readonly content: ContentStore;
  private readonly layers: LayerStore;
  /** Metadata changes and garbage collection happen one at a time. */
  private readonly mutex = new Mutex();
  /** Blobs and layers in-flight pulls and imports rely on: garbage collection keeps them. */
  private readonly leases: Leases;
  /** What every pull shares. */
  private readonly pulls: PullContext;
  readonly stats: PullStats = { bytes: 0, inFlight: 0 };

  private constructor(private readonly opts: ImagesOptions) {
    const tmp = join(opts.rootDir, 'tmp');
    const received = (n: number) => { this.stats.bytes += n; };
    this.content = new ContentStore(opts.rootDir, tmp, opts.log, received);
    this.layers = new LayerStore(opts.rootDir, tmp, opts.log, opts.rootfsDir);
    this.leases = new Leases(opts.pulls);
    this.pulls = {
      content: this.content, layers: this.layers, log: opts.log, received,
      client: new RegistryClient({ hosts: opts.registries, log: opts.log, transport: opts.transport, limits: opts.limits }),
      downloads: new Semaphore(opts.maxConcurrentDownloads ?? DEFAULT_CONCURRENT_DOWNLOADS),
      transfers: new SingleFlight<number>(),
      receiving: new Map(),
      stallTimeoutMs: opts.stallTimeoutMs,
      progressIntervalMs: opts.progressIntervalMs,
      keepLayerBlobs: opts.keepLayerBlobs ?? false,
    };
  }

  /** Opens the store, dropping what an earlier crash left half done. */
  static async open(opts: ImagesOptions): Promise<Images> {
    // Layers may be a private registry's content: root's alone, however the directory was made before.
    await mkdir(opts.rootDir, { recursive: true, mode: 0o700 });
    await chmod(opts.rootDir, 0o700);
    await rm(join(opts.rootDir, 'tmp'), { recursive: true, force: true });
    const images = new Images(opts);
    await images.content.init();
    await images.layers.init();
    await images.layers.cleanIncompleteRootfs();
    await images.gc();
    images.forgetCutOffPulls();
    return images;
  }

  /** After the start's gc: pulls a crash cut off have left nothing no image uses, so their intents go. */
  private forgetCutOffPulls(): void {
    for (const intent of this.opts.pulls?.list() ?? []) {
      this.opts.log.warn({ image: intent.reference, startedAt: new Date(intent.startedAt).toISOString(), leased: intent.leased.length },
        'a pull was cut off by a crash: what it stored that no image uses has been removed');
      this.opts.pulls!.delete(intent.id);
    }
  }

  // ---- queries ----

  list(filter?: { image?: string }): ImageRecord[] {
    if (filter?.image) {
      const r = this.status(filter.image);
      return r ? [r] : [];
    }
    return this.opts.repo.list();
  }

  /** The image a reference, id or unique id prefix names, or undefined. Malformed references are InvalidArgument. */
  status(refOrId: string): ImageRecord | undefined {
    const id = ID_RE.exec(refOrId);
    const byId = id && this.opts.repo.get(`sha256:${id[1]}`);
    if (byId) return byId;
    let ref: ImageRef | undefined;
    try {
      ref = parseReference(refOrId);
    } catch (err) {
      if (!ID_PREFIX_RE.test(refOrId)) throw err;
    }
    const all = this.opts.repo.list();
    if (ref?.digest) {
      const name = `${refName(ref)}@${ref.digest}`;
      const found = all.find((r) => r.repoDigests.includes(name)) ?? this.opts.repo.get(ref.digest);
      if (found) return found;
    } else if (ref) {
      const name = `${refName(ref)}:${ref.tag}`;
      const found = all.find((r) => r.repoTags.includes(name));
      if (found) return found;
    }
    const prefix = ID_PREFIX_RE.exec(refOrId);
    const matches = prefix ? all.filter((r) => r.id.startsWith(`sha256:${prefix[1]}`)) : [];
    return matches.length === 1 ? matches[0] : undefined;
  }

  /** Like status, but a missing image is NotFound. */
  resolve(refOrId: string): ImageRecord {
    const r = this.status(refOrId);
    if (!r) throw new NotFound(`image "${refOrId}" not found: pull it first`);
    return r;
  }

  // ---- pull ----

  /**
   * Pulls an image; `pinned` marks it as one kubelet's image GC must keep (the pause image). When `signal`
   * aborts (the client gave up) the pull stops and leaves nothing behind, except what another pull of the same
   * content still needs.
   */
  async pull(reference: string, auth?: AuthConfig, opts: { pinned?: boolean; signal?: AbortSignal } = {}): Promise<ImageRecord> {
    const ref = parseReference(reference);
    const started = Date.now();
    const lease = this.leases.open(formatReference(ref));
    const pull = new Pull(this.pulls, ref, auth, lease, opts.signal);
    this.stats.inFlight++;
    try {
      const image = await pull.fetch();
      const record = await this.mutex.lock(() => this.commit({ ...image, pinned: opts.pinned ?? false }));
      const seconds = (Date.now() - started) / 1000;
      const mbPerSecond = Number((pull.downloaded / 1e6 / Math.max(seconds, 0.001)).toFixed(2));
      pull.log.info({ id: record.id, bytes: pull.downloaded, seconds, mbPerSecond, from: pull.source }, 'image pulled');
      return record;
    } catch (err) {
      pull.log.warn({ err: (err as Error).message, bytes: pull.downloaded }, 'image pull failed');
      throw pullSpaceError(err, this.opts.rootDir, pull.name);
    } finally {
      this.stats.inFlight--;
      lease.release();
      // A failed pull leaves nothing behind; this also sweeps what a successful one made stale.
      await this.gc().catch((err: Error) => pull.log.warn({ err: err.message }, 'garbage collection after pull failed'));
    }
  }

  /** Stores the record, moving the tag off any image that had it. Runs under the mutex. */
  private commit(n: Omit<PulledImage, 'digest'> & { digest?: string; pinned: boolean }): ImageRecord {
    const repo = this.opts.repo;
    if (n.tag) {
      for (const other of repo.list()) {
        if (other.id === n.id || !other.repoTags.includes(n.tag)) continue;
        const repoTags = other.repoTags.filter((t) => t !== n.tag);
        if (repoTags.length === 0 && other.repoDigests.length === 0) repo.delete(other.id);
        else repo.put({ ...other, repoTags });
      }
    }
    const old = repo.get(n.id);
    const record: ImageRecord = {
      id: n.id,
      repoTags: union(old?.repoTags, n.tag),
      repoDigests: union(old?.repoDigests, n.digest),
      size: n.size,
      config: n.config,
      layers: n.layers,
      blobs: [...new Set([...(old?.blobs ?? []), ...n.blobs])],
      pinned: (old?.pinned ?? false) || n.pinned,
      createdAt: old?.createdAt ?? Date.now(),
    };
    // The table keeps what it is given: it gets its own copy of what the caller is handed.
    repo.put(structuredClone(record));
    return record;
  }

  // ---- warm-up ----

  /**
   * Pulls a made-up image from a registry of its own into stores of its own and deletes it (warm-up.ts), so the
   * next pull runs on optimized code; once that worked, the unpack workers stay from then on. Nothing is
   * recorded; a failure is the caller's to log.
   */
  async warmUp(signal?: AbortSignal): Promise<void> {
    await warmUpPull(this.pulls, this.opts.transport, join(this.opts.rootDir, 'tmp'), this.opts.log, signal);
    keepUnpackWorkers();
  }

  // ---- local import ----

  /**
   * Imports an image built from local files as a single uncompressed layer (the pause image). Deterministic:
   * the same files and config give the same id, so importing again at every start changes nothing.
   */
  async importLocal(name: string, files: LocalFile[], config: ImageConfig, opts: { pinned?: boolean } = {}): Promise<ImageRecord> {
    const ref = parseReference(name);
    if (ref.digest) throw new InvalidArgument(`local image name "${name}" cannot carry a digest`);
    const layer = await buildLayer(files);
    const layerDigest = digestOf(layer);
    const configBytes = Buffer.from(JSON.stringify(buildImageConfig(config, [layerDigest], HOST_PLATFORM)));
    const configDigest = digestOf(configBytes);
    const manifest = buildImageManifest({ digest: configDigest, size: configBytes.length },
      [{ mediaType: MediaType.ociLayer, digest: layerDigest, size: layer.length }]);
    const blobs = [digestOf(manifest), configDigest, layerDigest];
    const lease = this.leases.open();
    try {
      for (const b of blobs) lease.hold(b);
      for (const b of [layer, configBytes, manifest]) await this.content.put(b);
      await this.layers.ensure(layerDigest, this.content.path(layerDigest), `layer of local image "${name}"`);
      const record = await this.mutex.lock(() => this.commit({
        id: configDigest,
        tag: `${refName(ref)}:${ref.tag}`,
        size: configBytes.length + layer.length,
        config, layers: [layerDigest], blobs, pinned: opts.pinned ?? false,
      }));
      this.opts.log.info({ image: formatReference(ref), id: record.id, pinned: record.pinned }, 'local image imported');
      return record;
    } finally {
      lease.release();
      await this.gc();
    }
  }

  // ---- remove ----

  /**
   * Removes the image an id, a tag or a digest reference names, with all its tags and digests: the CRI (1.36)
   * says removing an image by one of its tags removes every tag, across repositories too. Idempotent: an unknown
   * image is not an error. An image still in use is refused, naming who uses it.
   */
  async remove(refOrId: string): Promise<void> {
    await this.mutex.lock(() => {
      const r = this.status(refOrId);
      if (!r) return;
      const user = this.opts.usedBy?.(r.id);
      if (user) throw new FailedPrecondition(`image ${r.id} (${r.repoTags.join(', ') || 'untagged'}) is used by ${user}`);
      this.opts.repo.delete(r.id);
    });
    await this.gc();
  }

  // ---- root filesystems ----

  /** The root filesystem `key` for an image, made usable; see LayerStore.reserveRootfs. */
  async prepareRootfs(key: string, imageRefOrId: string, opts: RootfsOptions = {}): Promise<Rootfs> {
    // The lock covers the lookup and the metadata that keeps the layers from gc. The mount, the slow part,
    // runs outside it, so a storm of pods mounts its root filesystems side by side.
    const reserved = await this.mutex.lock(() => {
      const r = this.resolve(imageRefOrId);
      return this.layers.reserveRootfs(key, r.id, r.layers, opts);
    });
    return this.layers.mountRootfs(reserved);
  }

  async removeRootfs(key: string): Promise<void> {
    await this.layers.removeRootfs(key);
  }

  listRootfs(): Promise<Rootfs[]> {
    return this.layers.listRootfs();
  }

  // ---- space ----

  /** Bytes and inodes of image content: blobs and unpacked layers (container upper dirs are not image data). */
  async fsInfo(): Promise<FsInfo> {
    const blobs = await diskUsage(join(this.opts.rootDir, 'blobs'));
    let usedBytes = blobs.bytes;
    let inodesUsed = blobs.inodes;
    for (const l of await this.layers.list()) {
      const u = await this.layers.usage(l);
      usedBytes += u.bytes;
      inodesUsed += u.inodes;
    }
    return { mountpoint: this.opts.rootDir, usedBytes, inodesUsed, timestamp: Date.now() };
  }

  /** Bytes and inodes of the containers' writable layers (the container filesystem's share of our data). */
  writableLayersUsage(): Promise<{ bytes: number; inodes: number }> {
    return this.layers.writableUsage(this.opts.writableUsageMaxAgeMs);
  }

  /** Deletes blobs and layers no image, rootfs or in-flight pull refers to. */
  gc(): Promise<void> {
    return this.mutex.lock(async () => {
      const keep = new Set(this.leases.held());
      for (const r of this.opts.repo.list()) for (const k of [...r.blobs, ...r.layers]) keep.add(k);
      for (const fs of await this.layers.listRootfs()) for (const l of fs.layers) keep.add(l);
      let blobs = 0;
      let layers = 0;
      for (const d of await this.content.list()) if (!keep.has(d)) { await this.content.delete(d); blobs++; }
      for (const l of await this.layers.list()) if (!keep.has(l)) { await this.layers.delete(l); layers++; }
      if (blobs || layers) this.opts.log.debug({ blobs, layers }, 'garbage collected');
    });
  }
}

function union(list: string[] | undefined, item: string | undefined): string[] {
  const out = [...(list ?? [])];
  if (item && !out.includes(item)) out.push(item);
  return out;
}

/** An uncompressed tar of the files, with parent directories, fixed mtimes and root ownership. */
async function buildLayer(files: LocalFile[]): Promise<Buffer> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  const collected = new Promise<Buffer>((resolve, reject) => {
    pack.on('data', (c: unknown) => chunks.push(c as Buffer));
    pack.on('end', () => resolve(Buffer.concat(chunks)));
    pack.on('error', reject);
  });
  const dirs = new Set<string>();
  const mtime = new Date(0);
  for (const f of [...files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))) {
    if (!f.path.startsWith('/') || f.path.split('/').includes('..')) {
      throw new InvalidArgument(`local image file "${f.path}" must be an absolute path without ".."`);
    }
    const parts = f.path.split('/').filter(Boolean);
    for (let i = 1; i <= (f.directory ? parts.length : parts.length - 1); i++) {
      const dir = parts.slice(0, i).join('/');
      if (!dirs.has(dir)) {
        dirs.add(dir);
        pack.entry({ name: `${dir}/`, type: 'directory', mode: i === parts.length ? f.mode ?? 0o755 : 0o755, mtime, uid: 0, gid: 0 });
      }
    }
    if (f.directory) continue;
    const data = f.data !== undefined ? Buffer.from(f.data) : f.source ? await readFile(f.source) : undefined;
    if (data === undefined) throw new InvalidArgument(`local image file "${f.path}" needs a source or data`);
    pack.entry({ name: parts.join('/'), type: 'file', mode: f.mode ?? 0o644, mtime, uid: 0, gid: 0 }, data);
  }
  pack.finalize();
  return collected;
}
