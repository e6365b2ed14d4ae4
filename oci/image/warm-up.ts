// The pull path, run once on a made-up image before a pull needs it. A new daemon's first pull runs on code V8
// has yet to compile and optimize, on the main thread (the manifest and config, the HTTP body and its batching
// for the workers, the layer store) and on unpack workers that must first start: a ~100 MB image took
// 0.35–0.38 s so, against 0.21–0.23 s on a daemon that had pulled before. So, once the daemon is up and quiet
// (server/pull-warm-up.ts), it pulls an image of two generated layers from a registry of this module, through
// the same Pull its CRI pulls take (the registry client, the unpack workers, every check of digest, size and
// diff id), into a content and layer store of its own under the image store's tmp dir, and deletes it: no
// image, blob or lease is recorded, and the pull metrics do not count it. The registry listens on a Unix socket
// in that directory (root's alone), not on a port: no other process can ask it for anything.
import { createHash, randomBytes, type Hash } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { PassThrough, pipeline as pipelineEach, Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import tar from 'tar-stream';
import { Agent } from 'undici';
import { SingleFlight } from '../../core/locks.js';
import type { Logger } from '../../core/log.js';
import { ContentStore, digestOf } from './content.js';
import { undiciTransport, type Transport } from './http.js';
import { Leases } from './lease.js';
import { buildImageConfig, buildImageManifest, MediaType } from './manifest.js';
import { HOST_PLATFORM } from './platform.js';
import { Pull, type PullContext } from './pull.js';
import { parseReference } from './reference.js';
import { RegistryClient } from './registry.js';
import { LayerStore } from './snapshot.js';

/** What one made-up layer holds: small files (most of a layer's entries) and big ones (most of its bytes). */
export interface WarmUpLayer { smallFiles: number; smallBytes: number; bigFiles: number; bigBytes: number }

/**
 * About 32 MB in two layers, one for each unpack worker. A new daemon's first ~100 MB pull after a pull of 2 MB
 * or 8 MB took 0.29–0.31 s, after 32 MB 0.23–0.26 s, after 64 MB no less: V8 optimizes a function once it has
 * run a while, and the steps of a layer run once per socket read of at most 64 KiB.
 */
export const WARM_UP_LAYERS: readonly WarmUpLayer[] = [0, 1].map(() => ({
  smallFiles: 64, smallBytes: 4096, bigFiles: 8, bigBytes: 2 << 20,
}));

/** The repository and tag the registry answers for. */
const REPOSITORY = 'minicri/warm-up';
const TAG = 'latest';
const PATH = new RegExp(`^/v2/${REPOSITORY}/(manifests|blobs)/([^/]+)$`);

/** Layer `index` as a tar of zero-filled files; the same bytes at every call. */
export function warmUpTar(index: number, layer: WarmUpLayer): Readable {
  const pack = tar.pack();
  const entry = (name: string, size: number) => pack.entry({ name: `warm-up/${index}/${name}`, size, mode: 0o644, mtime: new Date(0) });
  void (async () => {
    try {
      for (let i = 0; i < layer.smallFiles; i++) await pipeline(zeros(layer.smallBytes), entry(`small/${i}`, layer.smallBytes));
      for (let i = 0; i < layer.bigFiles; i++) await pipeline(zeros(layer.bigBytes), entry(`big/${i}`, layer.bigBytes));
      pack.finalize();
    } catch (err) {
      pack.destroy(err as Error);
    }
  })();
  return pack as unknown as Readable;
}

/** The layer's blob: its tar gzipped without compression, so its bytes cross the socket and the inflater at full size. */
export function warmUpBlob(index: number, layer: WarmUpLayer): Readable {
  const gzip = createGzip({ level: 0 });
  // A reader that goes (a warm-up cut off) ends the tar too; the reader sees any error on the gzip.
  pipelineEach(warmUpTar(index, layer), gzip, () => undefined);
  return gzip;
}

/** `bytes` zeros, 256 KiB at a time, one buffer reused. */
function zeros(bytes: number): Readable {
  const piece = Buffer.alloc(Math.min(bytes, 256 << 10));
  let left = bytes;
  const out = new PassThrough();
  const more = () => {
    while (left > 0) {
      const n = Math.min(left, piece.length);
      left -= n;
      if (!out.write(piece.subarray(0, n))) return void out.once('drain', more);
    }
    out.end();
  };
  more();
  return out;
}

export interface WarmUpBlobId { digest: string; diffId: string; size: number }

/** The digest, size and diff id of warmUpBlob(index, layer), made once to be hashed and dropped. */
export async function warmUpBlobId(index: number, layer: WarmUpLayer): Promise<WarmUpBlobId> {
  const tarHash = createHash('sha256');
  const blobHash = createHash('sha256');
  let size = 0;
  await pipeline(warmUpTar(index, layer), hashing(tarHash), createGzip({ level: 0 }), async (blob: AsyncIterable<Buffer>) => {
    for await (const chunk of blob) {
      blobHash.update(chunk);
      size += chunk.length;
    }
  });
  return { digest: `sha256:${blobHash.digest('hex')}`, diffId: `sha256:${tarHash.digest('hex')}`, size };
}

function hashing(hash: Hash): Transform {
  return new Transform({ transform(chunk: Buffer, _e, done) { hash.update(chunk); done(null, chunk); } });
}

export interface WarmUpRegistry {
  /** The image's reference: localhost/minicri/warm-up:latest. */
  ref: string;
  /** `base` with every request sent to the registry's socket, whatever the URL's host. */
  transport(base: Transport): Transport;
  close(): Promise<void>;
}

/** A registry on the Unix socket `socketPath` serving one image of `layers`: its manifest (by tag or digest), config and layers. */
export async function serveWarmUpImage(socketPath: string, layers: readonly WarmUpLayer[] = WARM_UP_LAYERS): Promise<WarmUpRegistry> {
  const ids = await Promise.all(layers.map((l, i) => warmUpBlobId(i, l)));
  const config = Buffer.from(JSON.stringify(buildImageConfig({
    entrypoint: [], cmd: ['/warm-up'], env: [], workingDir: '', user: '', exposedPorts: [], volumes: [], stopSignal: '', labels: {},
  }, ids.map((id) => id.diffId), HOST_PLATFORM)));
  const configDigest = digestOf(config);
  const manifest = buildImageManifest({ digest: configDigest, size: config.length },
    ids.map((id) => ({ mediaType: MediaType.ociLayerGzip, digest: id.digest, size: id.size })));
  const manifestDigest = digestOf(manifest);
  const layerOf = new Map(ids.map((id, i) => [id.digest, i]));
  const server = createServer((req, res) => {
    const [, kind, name] = PATH.exec(req.url ?? '') ?? [];
    const answer = (type: string, size: number, body: () => Buffer | Readable, digest?: string) => {
      res.writeHead(200, { 'content-type': type, 'content-length': size, ...(digest && { 'docker-content-digest': digest }) });
      if (req.method === 'HEAD') return void res.end();
      const bytes = body();
      if (Buffer.isBuffer(bytes)) res.end(bytes);
      else pipeline(bytes, res).catch(() => res.destroy());
    };
    const layer = kind === 'blobs' ? layerOf.get(name!) : undefined;
    if (kind === 'manifests' && (name === TAG || name === manifestDigest)) {
      answer(MediaType.ociManifest, manifest.length, () => manifest, manifestDigest);
    } else if (kind === 'blobs' && name === configDigest) {
      answer('application/octet-stream', config.length, () => config);
    } else if (layer !== undefined) {
      answer('application/octet-stream', ids[layer]!.size, () => warmUpBlob(layer, layers[layer]!));
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(socketPath, resolve));
  const agent = new Agent({ connect: { socketPath } });
  return {
    ref: `localhost/${REPOSITORY}:${TAG}`,
    transport: (base) => (url, init) => base(url, { ...init, dispatcher: agent }),
    async close() {
      await agent.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Pulls the warm-up image into stores of its own under `tmpDir`, which it leaves as it was: with a registry
 * client of its own (default limits, no mirrors or credentials, `transport` sent to the warm-up registry) and
 * `pulls`' download slots and settings. Fails as a pull of a bad image would: the path is broken then.
 */
export async function warmUpPull(
  pulls: PullContext, transport: Transport | undefined, tmpDir: string, log: Logger, signal?: AbortSignal,
): Promise<void> {
  const dir = join(tmpDir, `warm-up-${randomBytes(8).toString('hex')}`);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  try {
    const registry = await serveWarmUpImage(join(dir, 'registry.sock'));
    try {
      const ctx: PullContext = {
        ...pulls,
        client: new RegistryClient({
          hosts: { mirrors: {}, insecure: [] }, log, transport: registry.transport(transport ?? undiciTransport),
        }),
        content: new ContentStore(dir, join(dir, 'tmp'), log),
        layers: new LayerStore(dir, join(dir, 'tmp'), log),
        transfers: new SingleFlight<number>(),
        receiving: new Map(),
        received: () => undefined,
      };
      await ctx.content.init();
      await ctx.layers.init();
      await new Pull(ctx, parseReference(registry.ref), undefined, new Leases().open(), signal).fetch();
    } finally {
      await registry.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
