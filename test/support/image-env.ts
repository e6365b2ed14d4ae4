// A temp-dir image service wired to test registries, with every request recorded, removed after the test.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { undiciTransport, type Transport } from '../../oci/image/http.js';
import { Images, type ImagesOptions } from '../../oci/image/images.js';
import type { RegistryHostsConfig } from '../../oci/image/types.js';
import { silentLogger } from '../../core/log.js';
import { MemoryImageRepository } from './image-repo.js';

export interface ImageEnv {
  images: Images;
  repo: MemoryImageRepository;
  rootDir: string;
  /** Every URL the service fetched, in order. */
  requests: string[];
  blobRequests(): string[];
}

export async function imageEnv(t: TestContext, registries: RegistryHostsConfig = { mirrors: {}, insecure: [] },
  extra: Partial<Pick<ImagesOptions, 'usedBy' | 'stallTimeoutMs' | 'progressIntervalMs' | 'log' | 'keepLayerBlobs' | 'transport'>> = {},
): Promise<ImageEnv> {
  const rootDir = await mkdtemp(join(tmpdir(), 'minicri-image-'));
  const repo = new MemoryImageRepository();
  const requests: string[] = [];
  const { transport = undiciTransport, ...rest } = extra;
  const recording: Transport = (url, init) => {
    requests.push(url.toString());
    return transport(url, init);
  };
  const images = await Images.open({ rootDir, repo, registries, log: silentLogger, transport: recording, ...rest });
  t.after(async () => {
    for (const fs of await images.listRootfs().catch(() => [])) await images.removeRootfs(fs.key).catch(() => undefined);
    await rm(rootDir, { recursive: true, force: true });
  });
  return { images, repo, rootDir, requests, blobRequests: () => requests.filter((u) => u.includes('/blobs/')) };
}
