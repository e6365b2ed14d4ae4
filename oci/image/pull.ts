// One image pull: its reference, the caller's credentials, the endpoint blobs come from, the lease that keeps
// what it writes from garbage collection and the caller's signal, with the pull's steps as methods. The
// catalogue (images.ts) starts it and records the image it fetched.
import { DeadlineExceeded, InvalidArgument, MinicriError, NotFound, Unavailable } from '../../core/errors.js';
import { faultPoint } from '../../core/faults.js';
import type { SingleFlight, Semaphore } from '../../core/locks.js';
import type { Logger } from '../../core/log.js';
import { retry } from '../../core/retry.js';
import type { ContentStore } from './content.js';
import type { Lease } from './lease.js';
import { overLimit } from './limits.js';
import type { Descriptor, Manifest } from './manifest.js';
import { formatPlatform, HOST_PLATFORM, runsOn, selectPlatform } from './platform.js';
import { PullProgress } from './progress.js';
import { formatReference, refName, type ImageRef } from './reference.js';
import type { Endpoint, RegistryClient } from './registry.js';
import type { LayerStore } from './snapshot.js';
import type { AuthConfig, ImageConfig } from './types.js';
import { parseOffThread, unpacksInWorker, warmUnpackWorkers } from './unpack-pool.js';

/** What every pull shares; the catalogue owns it. */
export interface PullContext {
  content: ContentStore;
  layers: LayerStore;
  client: RegistryClient;
  log: Logger;
  /** Layers downloaded (and unpacked) at once, across all pulls. */
  downloads: Semaphore;
  /** One download (and unpack) per layer blob, shared by every pull that needs it. */
  transfers: SingleFlight<number>;
  /** Bytes received so far of the layer blobs downloading now, for progress. */
  receiving: Map<string, () => number>;
  /** Hears of every chunk of layer received from a registry. */
  received(bytes: number): void;
  /** A blob download that receives no byte for this long fails over to the next endpoint (default 60 s). */
  stallTimeoutMs?: number;
  /** How often a running pull logs its progress (default 10 s). */
  progressIntervalMs?: number;
  /** Whether a layer's compressed blob stays in the content store beside its unpacked layer. */
  keepLayerBlobs?: boolean;
}

/** What a pull stored, for the catalogue to record. */
export interface PulledImage {
  id: string;
  /** "name:tag", unless the reference named a digest. */
  tag?: string;
  /** "name@digest" of the manifest the reference named. */
  digest: string;
  size: number;
  config: ImageConfig;
  /** Diff ids, base first. */
  layers: string[];
  blobs: string[];
}

/** The manifest the reference names, as fetched or read from the store, and the endpoint that served or confirmed it. */
interface TopManifest { digest: string; bytes: Buffer; contentType?: string; endpoint: Endpoint }

export class Pull {
  readonly name: string;
  readonly log: Logger;
  /** Bytes this pull downloaded. */
  downloaded = 0;
  /** The endpoint that served (or confirmed) the manifest; blobs come from it first. */
  private endpoint: Endpoint | undefined;

  constructor(
    private readonly ctx: PullContext,
    readonly ref: ImageRef,
    private readonly auth: AuthConfig | undefined,
    private readonly lease: Lease,
    private readonly signal: AbortSignal | undefined,
  ) {
    this.name = formatReference(ref);
    this.log = ctx.log.child({ image: this.name });
  }

  /** Where the blobs came from, for the log. */
  get source(): string {
    return this.endpoint?.url ?? 'content store';
  }

  /**
   * Stores the manifest, the config and every layer unpacked. On a failure the other layers still finish
   * first (allSettled), so nothing is written after the caller cleans up.
   */
  async fetch(): Promise<PulledImage> {
    const top = await this.topManifest();
    this.lease.hold(top.digest);
    await this.ctx.content.put(top.bytes);
    faultPoint('pull-manifest-stored');
    this.endpoint = top.endpoint;
    const { digest: manifestDigest, manifest } = await this.platformManifest(top);
    const { config, diffIds } = await this.imageConfig(manifest);
    manifest.layers.forEach((l, i) => { this.lease.hold(l.digest); this.lease.hold(diffIds[i]!); });
    await this.unpackLayers(manifest, diffIds);
    const ref = this.ref;
    return {
      id: manifest.config.digest,
      tag: ref.tag && !ref.digest ? `${refName(ref)}:${ref.tag}` : undefined,
      digest: `${refName(ref)}@${top.digest}`,
      size: manifest.config.size + manifest.layers.reduce((a, l) => a + l.size, 0),
      config,
      layers: diffIds,
      blobs: [...new Set([top.digest, manifestDigest, manifest.config.digest, ...manifest.layers.map((l) => l.digest)])],
    };
  }

  /**
   * The manifest the reference names (not stored yet). By digest it is read from the store when we have it, but
   * only once the registry confirmed it to this pull's credentials: stored content is no proof of the right to it.
   */
  private async topManifest(): Promise<TopManifest> {
    const { ref, ctx } = this;
    if (ref.digest && (await ctx.content.has(ref.digest))) {
      const endpoint = await ctx.client.confirmManifest(ref, ref.digest, this.auth, this.signal);
      return { digest: ref.digest, bytes: await ctx.content.read(ref.digest), endpoint };
    }
    return ctx.client.getManifest(ref, ref.digest ?? ref.tag!, this.auth, undefined, this.signal);
  }

  /** The top manifest itself, or the one for this node's platform that an index lists (fetched and stored). */
  private async platformManifest(top: TopManifest): Promise<{ digest: string; manifest: Manifest }> {
    const named = `manifest of "${this.name}"`;
    const parsed = await parseOffThread({ kind: 'manifest', bytes: top.bytes, contentType: top.contentType, what: named });
    if (parsed.kind === 'manifest') return { digest: top.digest, manifest: this.checkLayerCount(parsed.manifest, named) };
    const entries = parsed.index.manifests;
    const i = selectPlatform(entries);
    if (i < 0) {
      const have = entries.map((e) => (e.platform ? formatPlatform(e.platform) : 'unknown')).join(', ');
      throw new NotFound(`image "${this.name}" has no ${formatPlatform(HOST_PLATFORM)} variant (it has ${have})`);
    }
    const digest = entries[i]!.digest;
    this.lease.hold(digest);
    const child = await this.manifestBlob(digest);
    this.endpoint = child.endpoint;
    const what = `manifest ${digest} of "${this.name}"`;
    const inner = await parseOffThread({ kind: 'manifest', bytes: child.bytes, contentType: child.contentType, what });
    if (inner.kind !== 'manifest') throw new InvalidArgument(`${what} is an index inside an index`);
    return { digest, manifest: this.checkLayerCount(inner.manifest, what) };
  }

  /** A manifest within the layer limit: overlay stacks only so many lowerdirs in one mount. */
  private checkLayerCount(manifest: Manifest, what: string): Manifest {
    const max = this.ctx.client.limits.layers;
    if (manifest.layers.length > max) throw overLimit(what, 'layers', max, manifest.layers.length);
    return manifest;
  }

  private async manifestBlob(digest: string): Promise<{ bytes: Buffer; contentType?: string; endpoint?: Endpoint }> {
    const { content, client } = this.ctx;
    if (await content.has(digest)) return { bytes: await content.read(digest), endpoint: this.endpoint };
    const m = await client.getManifest(this.ref, digest, this.auth, this.endpoint, this.signal);
    await content.put(m.bytes);
    return m;
  }

  /** The image config, fetched and stored, checked against this node and the manifest. */
  private async imageConfig(manifest: Manifest): Promise<{ config: ImageConfig; diffIds: string[] }> {
    const name = this.name;
    const d = manifest.config;
    // Its size is checked before a byte is fetched, and the download stops at that size.
    const max = this.ctx.client.limits.configBytes;
    if (d.size > max) throw overLimit(`config ${d.digest} of "${name}"`, 'configBytes', max, d.size);
    this.lease.hold(d.digest);
    this.downloaded += await this.fetchBlob(d, `config of "${name}"`);
    const bytes = await this.ctx.content.read(d.digest);
    const { config, diffIds, platform } = await parseOffThread({ kind: 'config', bytes, what: `config ${d.digest} of "${name}"` });
    if (platform.os && platform.os !== 'linux') throw new InvalidArgument(`image "${name}" is for ${platform.os}, not linux`);
    if (!runsOn(platform)) {
      throw new InvalidArgument(`image "${name}" is for ${formatPlatform(platform)}, but this node is ${formatPlatform(HOST_PLATFORM)}: `
        + 'pull an image built for this node');
    }
    if (diffIds.length !== manifest.layers.length) {
      throw new InvalidArgument(`image "${name}" lists ${manifest.layers.length} layers but its config has ${diffIds.length} diff ids`);
    }
    return { config, diffIds };
  }

  /** Every layer unpacked, with progress logged while it runs. */
  private async unpackLayers(manifest: Manifest, diffIds: string[]): Promise<void> {
    const { ctx } = this;
    // The worker starts while the first layer requests go out; a pull whose missing layers are all small (the
    // pause image) needs none, and the daemon stays as small as it was.
    const missing = await Promise.all(manifest.layers.map(async (l, i) => !(await ctx.layers.has(diffIds[i]!)) && unpacksInWorker(l.size)));
    warmUnpackWorkers(missing.filter(Boolean).length);
    const progress = new PullProgress(manifest.layers, {
      log: this.log, intervalMs: ctx.progressIntervalMs ?? 10_000, slowAfterMs: ctx.stallTimeoutMs ?? 60_000,
      receiving: (digest) => ctx.receiving.get(digest)?.(),
    }).start();
    try {
      // allSettled: on a failure the other layers still finish before cleanup, so nothing is written after it.
      const results = await Promise.allSettled(manifest.layers.map(async (layer, i) => {
        const n = await this.pullLayer(layer, diffIds[i]!, `layer ${layer.digest} of "${this.name}"`);
        progress.layerDone(layer.digest);
        return n;
      }));
      for (const r of results) {
        if (r.status === 'rejected') throw r.reason;
        this.downloaded += r.value;
      }
    } finally {
      progress.stop();
    }
  }

  /** The endpoint that served the manifest first, then the registry's others in order. */
  private blobEndpoints(): Endpoint[] {
    // Set by fetch() from the top manifest before any blob is asked for.
    const first = this.endpoint!;
    return [first, ...this.ctx.client.endpoints(this.ref.registry).filter((e) => e.url !== first.url)];
  }

  /** Downloads a (small) blob into the store unless present; returns the bytes fetched. */
  private async fetchBlob(d: Descriptor, what: string): Promise<number> {
    const { content, client } = this.ctx;
    if (await content.has(d.digest)) return 0;
    const endpoints = this.blobEndpoints();
    return this.fromEndpoints(endpoints, (e) => content.ensure(d.digest, d.size, `${what} from ${e.url}`, (shared) =>
      client.openBlob(e, this.ref, d.digest, this.auth, { signal: shared, stallMs: this.ctx.stallTimeoutMs }), this.signal), this.signal);
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
        this.ctx.log.warn({ endpoint: e.url, err: err.message }, 'blob download failed, trying the next endpoint');
        failures.push(err);
      }
    }
    const Kind = failures.every((f) => f instanceof NotFound) ? NotFound
      : failures.some((f) => f instanceof DeadlineExceeded) ? DeadlineExceeded : Unavailable;
    throw new Kind(failures.map((f) => f.message).join('; '));
  }

  /**
   * Makes sure a layer is unpacked; returns the bytes this pull downloaded for it. The blob streams through its
   * digest check (and into the content store, when layer blobs are kept) and into the layer's unpack at once;
   * pulls needing the same layer share one transfer.
   */
  private async pullLayer(layer: Descriptor, diffId: string, what: string): Promise<number> {
    const { content, layers, downloads, transfers } = this.ctx;
    if (await layers.has(diffId)) return 0;
    if (await content.has(layer.digest)) {
      // The blob of a pull cut off before it unpacked.
      await downloads.run(() => layers.ensure(diffId, content.path(layer.digest), what), this.signal);
      return 0;
    }
    let fetched = false;
    // Only a transfer takes a download slot: a pull joining one waits on it, so the first pull giving up
    // does not stop it while the second still queues for a slot.
    const bytes = await transfers.do(layer.digest, (shared) => downloads.run(async () => {
      if (await layers.has(diffId)) return 0;
      fetched = true;
      const endpoints = this.blobEndpoints();
      return this.fromEndpoints(endpoints, (e) => this.transferLayer(e, layer, diffId, `${what} from ${e.url}`, shared), shared);
    }, shared), this.signal);
    return fetched ? bytes : 0;
  }

  /** One endpoint's try at a layer, on the shared transfer's signal: connection resets are retried there, a few times. */
  private transferLayer(e: Endpoint, layer: Descriptor, diffId: string, what: string, signal: AbortSignal): Promise<number> {
    const { ctx } = this;
    return retry(async () => {
      const body = await ctx.client.openBlob(e, this.ref, layer.digest, this.auth, { signal, stallMs: ctx.stallTimeoutMs });
      // Without a slot the bytes are still checked against the digest and size, only not written twice.
      const slot = ctx.keepLayerBlobs ? ctx.content.slot(layer.digest) : undefined;
      let received = 0;
      body.on('data', (chunk: Buffer) => { received += chunk.length; ctx.received(chunk.length); });
      ctx.receiving.set(layer.digest, () => received);
      try {
        await ctx.layers.unpack(diffId, body, what, layer.size, { tmp: slot?.tmp, digest: layer.digest, size: layer.size }, async () => {
          if (!slot) return;
          await slot.commit();
          faultPoint('pull-blob-stored');
        });
        faultPoint('pull-layer-unpacked');
        return received;
      } finally {
        body.destroy();
        ctx.receiving.delete(layer.digest);
        await slot?.discard();
      }
    }, {
      attempts: 3, signal,
      retryable: (err) => !(err instanceof MinicriError),
      onRetry: (err, attempt) =>
        ctx.log.debug({ digest: layer.digest, attempt, err: (err as Error).message }, 'layer download interrupted, retrying'),
    });
  }
}
