// The image service: pulls images into the content store and layer store, keeps their records, imports local
// images (the pause image), prepares container root filesystems, and collects what no image or container uses.
import { createHash, randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import tar from 'tar-stream';
import { faultPoint } from '../../core/faults.js';
import { causeWhere, DeadlineExceeded, FailedPrecondition, InvalidArgument, MinicriError, NotFound, ResourceExhausted, Unavailable } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { retry } from '../../core/retry.js';
import { ContentStore } from './content.js';
import type { Transport } from './http.js';
import { Mutex, Semaphore, SingleFlight } from '../../core/locks.js';
import { buildImageConfig, MediaType, parseImageConfig, parseManifestOrIndex, type Descriptor, type Manifest } from './manifest.js';
import { formatPlatform, HOST_PLATFORM, runsOn, selectPlatform } from './platform.js';
import { PullProgress } from './progress.js';
import { unpacksInWorker, warmUnpackWorkers } from './unpack-pool.js';
import { formatReference, parseReference, refName, type ImageRef } from './reference.js';
import { RegistryClient, type Endpoint } from './registry.js';
import { diskUsage, LayerStore, type Rootfs, type RootfsOptions } from './snapshot.js';
import type { AuthConfig, ImageConfig, ImageRecord, ImageRepository, RegistryHostsConfig } from './types.js';

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
  /** Layers downloaded (and unpacked) at once, across all pulls. */
  maxConcurrentDownloads?: number;
  /** For tests that watch requests; defaults to undici's request. */
  transport?: Transport;
  /** Where pulls record their intent (the daemon's state store); without it a crash is still cleaned up, unlogged. */
  pulls?: PullIntentRepository;
  /** A blob download that receives no byte for this long fails over to the next endpoint (default 60 s). */
  stallTimeoutMs?: number;
  /** How often a running pull logs its progress (default 10 s). */
  progressIntervalMs?: number;
}

/**
 * A pull under way: written before the pull touches the disk and rewritten as it leases blobs and layers,
 * deleted once its image record is committed (or the pull failed and was cleaned up). One found at start
 * names a pull a crash cut off; what it leased and no image uses is collected then.
 */
export interface PullIntent {
  id: string;
  reference: string;
  startedAt: number;
  /** Blob digests and layer diff ids the pull may have written. */
  leased: string[];
}

export interface PullIntentRepository {
  list(): PullIntent[];
  put(p: PullIntent): void;
  delete(id: string): void;
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

/** Where a pull's blobs come from, found on the signal of the caller that first needs it. */
type EndpointSource = (signal: AbortSignal | undefined) => Promise<Endpoint>;

export interface FsInfo { mountpoint: string; usedBytes: number; inodesUsed: number; timestamp: number }

const ID_RE = /^(?:sha256:)?([a-f0-9]{64})$/;
const ID_PREFIX_RE = /^(?:sha256:)?([a-f0-9]{12,63})$/;

/** The ENOSPC error behind `err` (directly or as a cause), if a full disk is what failed. */
function noSpaceError(err: unknown): NodeJS.ErrnoException | undefined {
  return causeWhere(err, (e) => e.code === 'ENOSPC');
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
  private readonly client: RegistryClient;
  private readonly downloads: Semaphore;
  /** Metadata changes and garbage collection happen one at a time. */
  private readonly mutex = new Mutex();
  /** Blobs and layers in-flight pulls rely on, with counts: garbage collection keeps them. */
  private readonly active = new Map<string, number>();
  /** One download (and unpack) per layer blob, shared by every pull that needs it. */
  private readonly transfers = new SingleFlight<number>();
  /** Bytes received so far of the layer blobs downloading now, for progress. */
  private readonly receiving = new Map<string, () => number>();
  readonly stats: PullStats = { bytes: 0, inFlight: 0 };

  private constructor(private readonly opts: ImagesOptions) {
    const tmp = join(opts.rootDir, 'tmp');
    this.content = new ContentStore(opts.rootDir, tmp, opts.log, (n) => { this.stats.bytes += n; });
    this.layers = new LayerStore(opts.rootDir, tmp, opts.log, opts.rootfsDir);
    this.client = new RegistryClient({ hosts: opts.registries, log: opts.log, transport: opts.transport });
    this.downloads = new Semaphore(opts.maxConcurrentDownloads ?? 3);
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
    const name = formatReference(ref);
    const started = Date.now();
    const log = this.opts.log.child({ image: name });
    const signal = opts.signal;
    const lease = this.lease(name);
    let downloaded = 0;
    let progress: PullProgress | undefined;
    this.stats.inFlight++;
    try {
      const top = await this.topManifest(ref, auth, signal);
      lease.hold(top.digest);
      await this.content.put(top.bytes);
      faultPoint('pull-manifest-stored');
      let manifestDigest = top.digest;
      let parsed = parseManifestOrIndex(top.bytes, top.contentType, `manifest of "${name}"`);
      let endpoint = top.endpoint;
      if (parsed.kind === 'index') {
        const entries = parsed.index.manifests;
        const i = selectPlatform(entries);
        if (i < 0) {
          const have = entries.map((e) => (e.platform ? formatPlatform(e.platform) : 'unknown')).join(', ');
          throw new NotFound(`image "${name}" has no ${formatPlatform(HOST_PLATFORM)} variant (it has ${have})`);
        }
        manifestDigest = entries[i]!.digest;
        lease.hold(manifestDigest);
        const child = await this.manifestBlob(ref, manifestDigest, auth, endpoint, signal);
        endpoint = child.endpoint;
        parsed = parseManifestOrIndex(child.bytes, child.contentType, `manifest ${manifestDigest} of "${name}"`);
        if (parsed.kind !== 'manifest') throw new InvalidArgument(`manifest ${manifestDigest} of "${name}" is an index inside an index`);
      }
      const manifest: Manifest = parsed.manifest;
      // Manifests read from our store came from no endpoint: blobs then come from the first one that has the image.
      let located: Promise<Endpoint> | undefined;
      // Asked on the signal of whoever needs it first: a layer transfer another pull shares asks on the shared one.
      const source = (asking: AbortSignal | undefined) => (endpoint ? Promise.resolve(endpoint) : (located ??= this.client.getManifest(ref, ref.digest ?? ref.tag!, auth, undefined, asking).then((m) => m.endpoint)));
      lease.hold(manifest.config.digest);
      downloaded += await this.fetchBlob(ref, manifest.config, source, auth, `config of "${name}"`, signal);
      const { config, diffIds, platform } = parseImageConfig(await this.content.read(manifest.config.digest), `config ${manifest.config.digest} of "${name}"`);
      if (platform.os && platform.os !== 'linux') throw new InvalidArgument(`image "${name}" is for ${platform.os}, not linux`);
      if (!runsOn(platform)) {
        throw new InvalidArgument(`image "${name}" is for ${formatPlatform(platform)}, but this node is ${formatPlatform(HOST_PLATFORM)}: pull an image built for this node`);
      }
      if (diffIds.length !== manifest.layers.length) {
        throw new InvalidArgument(`image "${name}" lists ${manifest.layers.length} layers but its config has ${diffIds.length} diff ids`);
      }
      manifest.layers.forEach((l, i) => { lease.hold(l.digest); lease.hold(diffIds[i]!); });
      // The worker starts while the first layer requests go out; a pull whose missing layers are all small (the
      // pause image) needs none, and the daemon stays as small as it was.
      const missing = await Promise.all(manifest.layers.map(async (l, i) => !(await this.layers.has(diffIds[i]!)) && unpacksInWorker(l.size)));
      warmUnpackWorkers(missing.filter(Boolean).length);
      progress = new PullProgress(manifest.layers, {
        log, intervalMs: this.opts.progressIntervalMs ?? 10_000, slowAfterMs: this.opts.stallTimeoutMs ?? 60_000,
        receiving: (digest) => this.receiving.get(digest)?.(),
      }).start();
      // allSettled: on a failure the other layers still finish before cleanup, so nothing is written after it.
      const results = await Promise.allSettled(manifest.layers.map(async (layer, i) => {
        const n = await this.pullLayer(ref, layer, diffIds[i]!, source, auth, `layer ${layer.digest} of "${name}"`, signal);
        progress!.layerDone(layer.digest);
        return n;
      }));
      for (const r of results) {
        if (r.status === 'rejected') throw r.reason;
        downloaded += r.value;
      }
      const blobs = [...new Set([top.digest, manifestDigest, manifest.config.digest, ...manifest.layers.map((l) => l.digest)])];
      const record = await this.mutex.lock(() => this.commit({
        id: manifest.config.digest,
        tag: ref.tag && !ref.digest ? `${refName(ref)}:${ref.tag}` : undefined,
        digest: `${refName(ref)}@${top.digest}`,
        size: manifest.config.size + manifest.layers.reduce((a, l) => a + l.size, 0),
        config, layers: diffIds, blobs, pinned: opts.pinned ?? false,
      }));
      const seconds = (Date.now() - started) / 1000;
      log.info({ id: record.id, bytes: downloaded, seconds, mbPerSecond: Number((downloaded / 1e6 / Math.max(seconds, 0.001)).toFixed(2)), from: endpoint?.url ?? 'content store' }, 'image pulled');
      return record;
    } catch (err) {
      log.warn({ err: (err as Error).message, bytes: downloaded }, 'image pull failed');
      const full = noSpaceError(err);
      if (full) {
        throw new ResourceExhausted(`no space left on the device holding ${full.path ?? this.opts.rootDir} while pulling "${name}": free space there or move root_dir to a larger filesystem`, { cause: err });
      }
      throw err;
    } finally {
      progress?.stop();
      this.stats.inFlight--;
      lease.release();
      // A failed pull leaves nothing behind; this also sweeps what a successful one made stale.
      await this.gc().catch((err: Error) => log.warn({ err: err.message }, 'garbage collection after pull failed'));
    }
  }

  /**
   * Protects blobs and layers from garbage collection while a pull or import works with them: hold each key
   * before it is written, release when the image record is committed (or the work failed). A pull's lease
   * (`pulling` names its reference) is also its intent in the state store, written before any of its keys is.
   */
  private lease(pulling?: string): { hold(key: string): void; release(): void } {
    const held: string[] = [];
    const intent = pulling !== undefined && this.opts.pulls
      ? { id: randomBytes(8).toString('hex'), reference: pulling, startedAt: Date.now(), leased: held }
      : undefined;
    if (intent) this.opts.pulls!.put(intent);
    return {
      hold: (key) => {
        held.push(key);
        this.active.set(key, (this.active.get(key) ?? 0) + 1);
        if (intent) this.opts.pulls!.put(intent);
      },
      release: () => {
        for (const key of held.splice(0)) {
          const n = (this.active.get(key) ?? 1) - 1;
          if (n > 0) this.active.set(key, n);
          else this.active.delete(key);
        }
        if (intent) this.opts.pulls!.delete(intent.id);
      },
    };
  }

  /** The manifest the reference names (not stored yet); by digest it is read from the store when we have it. */
  private async topManifest(ref: ImageRef, auth: AuthConfig | undefined, signal: AbortSignal | undefined): Promise<{ digest: string; bytes: Buffer; contentType?: string; endpoint?: Endpoint }> {
    if (ref.digest && (await this.content.has(ref.digest))) {
      return { digest: ref.digest, bytes: await this.content.read(ref.digest) };
    }
    return this.client.getManifest(ref, ref.digest ?? ref.tag!, auth, undefined, signal);
  }

  private async manifestBlob(ref: ImageRef, digest: string, auth: AuthConfig | undefined, endpoint: Endpoint | undefined, signal: AbortSignal | undefined): Promise<{ bytes: Buffer; contentType?: string; endpoint?: Endpoint }> {
    if (await this.content.has(digest)) return { bytes: await this.content.read(digest), endpoint };
    const m = await this.client.getManifest(ref, digest, auth, endpoint, signal);
    await this.content.put(m.bytes);
    return m;
  }

  /** The endpoint that served the manifest first, then the registry's others in order. */
  private async blobEndpoints(ref: ImageRef, source: EndpointSource, signal: AbortSignal | undefined): Promise<Endpoint[]> {
    const first = await source(signal);
    return [first, ...this.client.endpoints(ref.registry).filter((e) => e.url !== first.url)];
  }

  /** Downloads a (small) blob into the store unless present; returns the bytes fetched. */
  private async fetchBlob(ref: ImageRef, d: Descriptor, source: EndpointSource, auth: AuthConfig | undefined, what: string, signal: AbortSignal | undefined): Promise<number> {
    if (await this.content.has(d.digest)) return 0;
    const endpoints = await this.blobEndpoints(ref, source, signal);
    return this.fromEndpoints(endpoints, (e) => this.content.ensure(d.digest, d.size, `${what} from ${e.url}`, (shared) =>
      this.client.openBlob(e, ref, d.digest, auth, { signal: shared, stallMs: this.opts.stallTimeoutMs }), signal), signal);
  }

  /**
   * Runs `attempt` against each endpoint in turn until one succeeds: an endpoint that lacks the blob, cannot
   * be reached or stalls is followed by the next; other failures (corrupt content, denied) end the pull.
   */
  private async fromEndpoints<T>(endpoints: Endpoint[], attempt: (e: Endpoint) => Promise<T>, signal: AbortSignal | undefined): Promise<T> {
    const failures: Error[] = [];
    for (const e of endpoints) {
      try {
        return await attempt(e);
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        if (!(err instanceof NotFound || err instanceof Unavailable || err instanceof DeadlineExceeded)) throw err;
        this.opts.log.warn({ endpoint: e.url, err: err.message }, 'blob download failed, trying the next endpoint');
        failures.push(err);
      }
    }
    const Kind = failures.every((f) => f instanceof NotFound) ? NotFound : failures.some((f) => f instanceof DeadlineExceeded) ? DeadlineExceeded : Unavailable;
    throw new Kind(failures.map((f) => f.message).join('; '));
  }

  /**
   * Makes sure a layer is unpacked; returns the bytes this pull downloaded for it. The blob streams into the
   * content store and into the layer's unpack at once; pulls needing the same layer share one transfer.
   */
  private async pullLayer(ref: ImageRef, layer: Descriptor, diffId: string, source: EndpointSource, auth: AuthConfig | undefined, what: string, signal: AbortSignal | undefined): Promise<number> {
    if (await this.layers.has(diffId)) return 0;
    if (await this.content.has(layer.digest)) {
      // The blob of a pull cut off before it unpacked.
      await this.downloads.run(() => this.layers.ensure(diffId, this.content.path(layer.digest), what), signal);
      return 0;
    }
    let fetched = false;
    // Only a transfer takes a download slot: a pull joining one waits on it, so the first pull giving up
    // does not stop it while the second still queues for a slot.
    const bytes = await this.transfers.do(layer.digest, (shared) => this.downloads.run(async () => {
      if (await this.layers.has(diffId)) return 0;
      fetched = true;
      const endpoints = await this.blobEndpoints(ref, source, shared);
      return this.fromEndpoints(endpoints, (e) => this.transferLayer(ref, e, layer, diffId, auth, `${what} from ${e.url}`, shared), shared);
    }, shared), signal);
    return fetched ? bytes : 0;
  }

  /** One endpoint's try at a layer: connection resets are retried there, a few times. */
  private transferLayer(ref: ImageRef, e: Endpoint, layer: Descriptor, diffId: string, auth: AuthConfig | undefined, what: string, signal: AbortSignal, attempts = 3): Promise<number> {
    return retry(async () => {
      const body = await this.client.openBlob(e, ref, layer.digest, auth, { signal, stallMs: this.opts.stallTimeoutMs });
      const slot = this.content.slot(layer.digest);
      let received = 0;
      body.on('data', (chunk: Buffer) => { received += chunk.length; this.stats.bytes += chunk.length; });
      this.receiving.set(layer.digest, () => received);
      try {
        await this.layers.unpack(diffId, body, what, layer.size, { tmp: slot.tmp, digest: layer.digest, size: layer.size }, async () => {
          await slot.commit();
          faultPoint('pull-blob-stored');
        });
        faultPoint('pull-layer-unpacked');
        return received;
      } finally {
        body.destroy();
        this.receiving.delete(layer.digest);
        await slot.discard();
      }
    }, {
      attempts, signal,
      retryable: (err) => !(err instanceof MinicriError),
      onRetry: (err, attempt) => this.opts.log.debug({ digest: layer.digest, attempt, err: (err as Error).message }, 'layer download interrupted, retrying'),
    });
  }

  /** Stores the record, moving the tag off any image that had it. Runs under the mutex. */
  private commit(n: { id: string; tag?: string; digest?: string; size: number; config: ImageConfig; layers: string[]; blobs: string[]; pinned: boolean }): ImageRecord {
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
    repo.put(record);
    return record;
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
    const layerDigest = sha256(layer);
    const configBytes = Buffer.from(JSON.stringify(buildImageConfig(config, [layerDigest], HOST_PLATFORM)));
    const manifest = Buffer.from(JSON.stringify({
      schemaVersion: 2,
      mediaType: MediaType.ociManifest,
      config: { mediaType: MediaType.ociConfig, digest: sha256(configBytes), size: configBytes.length },
      layers: [{ mediaType: MediaType.ociLayer, digest: layerDigest, size: layer.length }],
    }));
    const blobs = [sha256(manifest), sha256(configBytes), layerDigest];
    const lease = this.lease();
    try {
      for (const b of blobs) lease.hold(b);
      for (const b of [layer, configBytes, manifest]) await this.content.put(b);
      await this.layers.ensure(layerDigest, this.content.path(layerDigest), `layer of local image "${name}"`);
      const record = await this.mutex.lock(() => this.commit({
        id: sha256(configBytes),
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
    return this.layers.writableUsage();
  }

  /** Deletes blobs and layers no image, rootfs or in-flight pull refers to. */
  gc(): Promise<void> {
    return this.mutex.lock(async () => {
      const keep = new Set(this.active.keys());
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

function sha256(b: Buffer): string {
  return `sha256:${createHash('sha256').update(b).digest('hex')}`;
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
    if (!f.path.startsWith('/') || f.path.split('/').includes('..')) throw new InvalidArgument(`local image file "${f.path}" must be an absolute path without ".."`);
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
