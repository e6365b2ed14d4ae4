// Pull benchmark: a ~100 MB image of random data in 5 layers, and a 5-layer image of many small text files
// (what a distribution's base image looks like), from a local docker-registry, each pulled cold (empty store)
// and warm (everything present), through a CRI endpoint's PullImage. Run on its own
// (`node dist/bench/pull.js`) it pulls with minicri's image service in-process, without a daemon, and prints JSON.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Images } from '../oci/image/images.js';
import { silentLogger } from '../core/log.js';
import type { CriClient } from '../test/support/cri-client.js';
import { MemoryImageRepository } from '../test/support/image-repo.js';
import { startRegistry, type TestRegistry } from '../test/support/registry.js';
import { buildImage, pushImage } from '../test/support/test-images.js';
import { now, round, since } from './lib/stats.js';

const LAYERS = 5;
const FILES_PER_LAYER = 4;
const FILE_BYTES = 5 << 20;
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

function result(image: BigImage, coldMs: number, warmMs: number): PullResult {
  const mb = image.bytes / 1e6;
  return {
    image: { layers: image.layers, mb: round(mb) },
    cold: { seconds: round(coldMs / 1000), mbPerSecond: round(mb / (coldMs / 1000)) },
    warm: { seconds: round(warmMs / 1000) },
  };
}

/** Cold then warm PullImage on a CRI endpoint; the image is removed before and after. */
export async function pullBench(client: CriClient, image: BigImage): Promise<PullResult> {
  const spec = { image: image.ref };
  await client.image.call('RemoveImage', { image: spec });
  const time = async () => {
    const t0 = now();
    await client.image.call('PullImage', { image: spec }, { timeoutMs: 600_000 });
    return since(t0);
  };
  try {
    const cold = await time();
    const warm = await time();
    return result(image, cold, warm);
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
    console.log(JSON.stringify({ bench: 'pull', target: 'minicri-in-process', ...result(image, cold, warm) }));
  } finally {
    await rm(rootDir, { recursive: true, force: true });
    await reg.stop();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await inProcess();
