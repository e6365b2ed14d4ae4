// Pull benchmark: a ~100 MB image of random data in several layers from a local docker-registry, pulled cold
// (empty store) and warm (everything present). Prints JSON. Run: npx tsc -p . && node dist/bench/pull.js
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Images } from '../oci/image/images.js';
import { silentLogger } from '../server/log.js';
import { MemoryImageRepository } from '../test/support/image-repo.js';
import { startRegistry } from '../test/support/registry.js';
import { buildImage, pushImage } from '../test/support/test-images.js';

const LAYERS = 5;
const FILES_PER_LAYER = 4;
const FILE_BYTES = 5 << 20;

async function main(): Promise<void> {
  const reg = await startRegistry();
  const rootDir = await mkdtemp(join(tmpdir(), 'minicri-image-bench-'));
  try {
    const layers = Array.from({ length: LAYERS }, (_, l) => ({
      entries: Array.from({ length: FILES_PER_LAYER }, (_, f) => ({ name: `data/l${l}/f${f}`, data: randomBytes(FILE_BYTES) })),
      compression: 'gzip' as const,
    }));
    const img = await buildImage(layers, { Cmd: ['/bin/true'] });
    await pushImage(reg, 'bench/random', ['v1'], img);
    const bytes = [...img.blobs.values()].reduce((a, b) => a + b.length, 0);
    const ref = `${reg.host}/bench/random:v1`;
    const images = await Images.open({ rootDir, repo: new MemoryImageRepository(), registries: { mirrors: {}, insecure: [] }, log: silentLogger });
    const time = async () => {
      const t0 = process.hrtime.bigint();
      await images.pull(ref);
      return Number(process.hrtime.bigint() - t0) / 1e9;
    };
    const cold = await time();
    const warm = await time();
    const round = (n: number) => Number(n.toFixed(3));
    console.log(JSON.stringify({
      bench: 'pull',
      image: { layers: LAYERS, bytes, mb: round(bytes / 1e6) },
      cold: { seconds: round(cold), mbPerSecond: round(bytes / 1e6 / cold) },
      warm: { seconds: round(warm) },
    }));
  } finally {
    await rm(rootDir, { recursive: true, force: true });
    await reg.stop();
  }
}

await main();
