// Pull benchmark: a ~100 MB image of random data in 4 layers, a 5-layer image of many small text files
// (what a distribution's base image looks like) and a 1 GB image of 8 layers of incompressible data, from a
// local docker-registry, each pulled cold (empty store) and warm (everything present), through a CRI endpoint's
// PullImage, with the peak RSS of the daemon and its helper processes during the cold pull. Run on its own
// (`node dist/bench/pull.js`) it pulls with minicri's image service in-process, without a daemon, and prints JSON.
import { createCipheriv, createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { createGzip } from 'node:zlib';
import tar from 'tar-stream';
import { Images } from '../oci/image/images.js';
import { silentLogger } from '../core/log.js';
import type { CriClient } from '../test/support/cri-client.js';
import { MemoryImageRepository } from '../test/support/image-repo.js';
import { startRegistry, type TestRegistry } from '../test/support/registry.js';
import { buildImage, pushBlob, pushImage, pushManifest, sha256 } from '../test/support/test-images.js';
import { now, round, since } from './lib/stats.js';

const LAYERS = 4;
const FILES_PER_LAYER = 5;
const FILE_BYTES = 5 << 20;
/** The 1 GB image: 8 layers of 4 files of 32 MiB, each file a deterministic stream that gzip cannot shrink. */
const HUGE_LAYERS = 8;
const HUGE_FILES_PER_LAYER = 4;
const HUGE_FILE_BYTES = 32 << 20;
/** How often the daemon's memory is read during a pull. */
const RSS_EVERY_MS = 25;
/** The small-files image: per layer, directories of files from 64 B to 16 KiB of words (about 3:1 under gzip). */
const SMALL_DIRS = 40;
const SMALL_FILES_PER_DIR = 50;
const WORDS = ['node', 'pod', 'layer', 'image', 'mount', 'cgroup', 'runtime', 'network', 'sandbox', 'kernel', 'socket', 'config'];

export interface BigImage {
  ref: string;
  layers: number;
  /** Compressed bytes of config and layers: what a pull transfers. */
  bytes: number;
}

export interface PullResult {
  image: { layers: number; mb: number };
  cold: { seconds: number; mbPerSecond: number };
  warm: { seconds: number };
  /** VmRSS of the daemon plus its helper processes: before the cold pull, and the highest read during it. */
  rssMiB: { before: number; peak: number };
}

/** Pushes the random multi-layer image to `reg`. */
export async function pushBigImage(reg: TestRegistry): Promise<BigImage> {
  const layers = Array.from({ length: LAYERS }, (_, l) => ({
    entries: Array.from({ length: FILES_PER_LAYER }, (_, f) => ({ name: `data/l${l}/f${f}`, data: randomBytes(FILE_BYTES) })),
    compression: 'gzip' as const,
  }));
  const img = await buildImage(layers, { Cmd: ['/bin/true'] });
  await pushImage(reg, 'bench/random', ['v1'], img);
  return { ref: `${reg.host}/bench/random:v1`, layers: LAYERS, bytes: [...img.blobs.values()].reduce((a, b) => a + b.length, 0) };
}

/** Zeros through AES-CTR under a key made from `seed`: the same incompressible bytes every run, made as read. */
function incompressible(seed: string, bytes: number): Readable {
  const key = createHash('sha256').update(seed).digest();
  const cipher = createCipheriv('aes-256-ctr', key, Buffer.alloc(16));
  const zeros = Buffer.alloc(1 << 20);
  let left = bytes;
  return new Readable({
    read() {
      if (left === 0) { this.push(null); return; }
      const n = Math.min(left, zeros.length);
      left -= n;
      this.push(cipher.update(zeros.subarray(0, n)));
    },
  });
}

/** Counts and hashes what passes through. */
function digester(): Transform & { digest(): string; bytes: number } {
  const hash = createHash('sha256');
  const t = new Transform({
    transform(chunk: Buffer, _enc, done) { hash.update(chunk); t.bytes += chunk.length; done(null, chunk); },
  }) as Transform & { digest(): string; bytes: number };
  t.bytes = 0;
  t.digest = () => `sha256:${hash.digest('hex')}`;
  return t;
}

/** A tar stream of `files` files made by `data`, one after the other, none held in memory whole. */
function streamedTar(files: Array<{ name: string; size: number; data: () => Readable }>): Readable {
  const pack = tar.pack();
  void (async () => {
    try {
      for (const f of files) {
        const entry = pack.entry({ name: f.name, size: f.size, mode: 0o644, mtime: new Date(1_600_000_000_000) });
        await pipeline(f.data(), entry);
      }
      pack.finalize();
    } catch (err) {
      pack.destroy(err as Error);
    }
  })();
  return pack as unknown as Readable;
}

/** Streams the file at `path` into the registry as the blob `digest` (one monolithic PUT, nothing in memory). */
async function pushBlobFile(reg: TestRegistry, repository: string, path: string, digest: string): Promise<void> {
  const start = await fetch(`${reg.url}/v2/${repository}/blobs/uploads/`, { method: 'POST' });
  if (start.status !== 202) throw new Error(`starting an upload to ${reg.url}: ${start.status} ${await start.text()}`);
  const location = new URL(start.headers.get('location')!, reg.url);
  location.searchParams.set('digest', digest);
  const size = (await stat(path)).size;
  const status = await new Promise<number>((resolve, reject) => {
    const req = request(location, { method: 'PUT', headers: { 'content-type': 'application/octet-stream', 'content-length': size } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    createReadStream(path).on('error', reject).pipe(req);
  });
  if (status !== 201) throw new Error(`uploading ${digest} to ${reg.url}: ${status}`);
}

/**
 * Pushes the 1 GB image: each layer is made as a stream (tar of incompressible files, hashed, gzipped, hashed)
 * into a file under `scratch`, pushed from there, and removed: at most one layer on disk and none in memory.
 */
export async function pushHugeImage(reg: TestRegistry, scratch: string): Promise<BigImage> {
  const dir = join(scratch, 'huge-image');
  await mkdir(dir, { recursive: true });
  const repository = 'bench/huge';
  const diffIds: string[] = [];
  const layers: Array<{ mediaType: string; digest: string; size: number }> = [];
  try {
    for (let l = 0; l < HUGE_LAYERS; l++) {
      const files = Array.from({ length: HUGE_FILES_PER_LAYER }, (_, f) => ({
        name: `data/l${l}/f${f}`, size: HUGE_FILE_BYTES, data: () => incompressible(`minicri-bench-huge-${l}-${f}`, HUGE_FILE_BYTES),
      }));
      const raw = digester();
      const blob = digester();
      const file = join(dir, `layer${l}`);
      await pipeline(streamedTar(files), raw, createGzip({ level: 1 }), blob, createWriteStream(file));
      const digest = blob.digest();
      await pushBlobFile(reg, repository, file, digest);
      await rm(file);
      diffIds.push(raw.digest());
      layers.push({ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest, size: blob.bytes });
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const config = Buffer.from(JSON.stringify({ architecture: 'amd64', os: 'linux', config: { Cmd: ['/bin/true'] }, rootfs: { type: 'layers', diff_ids: diffIds } }));
  await pushBlob(reg, repository, config);
  const manifest = Buffer.from(JSON.stringify({
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: sha256(config), size: config.length },
    layers,
  }));
  await pushManifest(reg, repository, 'v1', manifest, 'application/vnd.oci.image.manifest.v1+json');
  return { ref: `${reg.host}/${repository}:v1`, layers: HUGE_LAYERS, bytes: config.length + layers.reduce((a, d) => a + d.size, 0) };
}

/** Pushes the 5-layer image of many small files to `reg`; the same bytes every run (a fixed-seed generator). */
export async function pushManyFilesImage(reg: TestRegistry): Promise<BigImage> {
  let seed = 1;
  const next = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32;
  const text = (bytes: number) => {
    const words: string[] = [];
    for (let n = 0; n < bytes; n += 8) words.push(WORDS[Math.floor(next() * WORDS.length)]!);
    return Buffer.from(words.join(' ')).subarray(0, bytes);
  };
  const layers = Array.from({ length: LAYERS }, (_, l) => ({
    entries: Array.from({ length: SMALL_DIRS }, (_, d) => [
      { name: `usr/l${l}/d${d}/`, type: 'directory' as const },
      ...Array.from({ length: SMALL_FILES_PER_DIR }, (_, f) => ({ name: `usr/l${l}/d${d}/f${f}`, data: text(64 + Math.floor(next() * 16 * 1024)) })),
    ]).flat(),
    compression: 'gzip' as const,
  }));
  const img = await buildImage(layers, { Cmd: ['/bin/true'] });
  await pushImage(reg, 'bench/files', ['v1'], img);
  return { ref: `${reg.host}/bench/files:v1`, layers: LAYERS, bytes: [...img.blobs.values()].reduce((a, b) => a + b.length, 0) };
}

function result(image: BigImage, coldMs: number, warmMs: number, rssMiB: PullResult['rssMiB']): PullResult {
  const mb = image.bytes / 1e6;
  return {
    image: { layers: image.layers, mb: round(mb) },
    cold: { seconds: round(coldMs / 1000), mbPerSecond: round(mb / (coldMs / 1000)) },
    warm: { seconds: round(warmMs / 1000) },
    rssMiB,
  };
}

/** VmRSS of the processes in KiB; a process gone counts nothing. */
async function vmRssKiB(pids: readonly number[]): Promise<number> {
  const each = await Promise.all(pids.map(async (pid) => {
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0);
  }));
  return each.reduce((a, b) => a + b, 0);
}

/**
 * Reads the memory of `pids` every few milliseconds until stopped; resolves with the highest sum in MiB. The
 * processes are listed once, before: a scan of /proc each time would take CPU from the pull it measures.
 */
function peakRss(pids: readonly number[]): { stop(): Promise<number> } {
  let peak = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      peak = Math.max(peak, await vmRssKiB(pids));
      await new Promise((r) => setTimeout(r, RSS_EVERY_MS));
    }
  })();
  return { stop: async () => { running = false; await loop; return round(peak / 1024, 1); } };
}

/** What the pull bench needs of a target: its client, and the daemon and helper processes whose memory counts. */
export interface PullTarget {
  readonly client: CriClient;
  readonly pid: number;
  /** Its helper processes (minicri's mount helper; containerd's shims, none during a pull). */
  helpers(): Promise<number[]>;
}

/** Cold then warm PullImage on a CRI endpoint; the image is removed before and after. */
export async function pullBench(target: PullTarget, image: BigImage): Promise<PullResult> {
  const client = target.client;
  const spec = { image: image.ref };
  await client.image.call('RemoveImage', { image: spec });
  const time = async () => {
    const t0 = now();
    await client.image.call('PullImage', { image: spec }, { timeoutMs: 600_000 });
    return since(t0);
  };
  try {
    const pids = [target.pid, ...await target.helpers()];
    const before = round(await vmRssKiB(pids) / 1024, 1);
    const sampler = peakRss(pids);
    let cold: number;
    let peak: number;
    try {
      cold = await time();
    } finally {
      peak = await sampler.stop();
    }
    const warm = await time();
    return result(image, cold, warm, { before, peak });
  } finally {
    await client.image.call('RemoveImage', { image: spec });
  }
}

async function inProcess(): Promise<void> {
  const reg = await startRegistry();
  const rootDir = await mkdtemp(join(tmpdir(), 'minicri-image-bench-'));
  try {
    const image = await pushBigImage(reg);
    const images = await Images.open({ rootDir, repo: new MemoryImageRepository(), registries: { mirrors: {}, insecure: [] }, log: silentLogger });
    const time = async () => {
      const t0 = now();
      await images.pull(image.ref);
      return since(t0);
    };
    const cold = await time();
    const warm = await time();
    const rss = round(await vmRssKiB([process.pid]) / 1024, 1);
    console.log(JSON.stringify({ bench: 'pull', target: 'minicri-in-process', ...result(image, cold, warm, { before: rss, peak: rss }) }));
  } finally {
    await rm(rootDir, { recursive: true, force: true });
    await reg.stop();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await inProcess();
