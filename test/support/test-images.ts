// Builds OCI images for tests from tar entries we write ourselves (busybox-static for a runnable base) and pushes
// them to a test registry through the distribution API.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { gzipSync } from 'node:zlib';
import { execa } from 'execa';
import tar from 'tar-stream';
import type { Platform } from '../../oci/image/types.js';
import { HOST_PLATFORM } from '../../oci/image/platform.js';
import type { TestRegistry } from './registry.js';

export interface TarEntry {
  name: string;
  type?: 'file' | 'directory' | 'symlink' | 'link' | 'character-device' | 'block-device' | 'fifo';
  data?: Buffer | string;
  mode?: number;
  linkname?: string;
  uid?: number;
  gid?: number;
  mtime?: Date;
  devmajor?: number;
  devminor?: number;
  pax?: Record<string, string>;
}

export type Compression = 'gzip' | 'zstd' | 'none';

/** `blob` replaces the built tarball with exact bytes (broken archives); `compression` then only picks the media type. */
export interface TestLayer { entries: TarEntry[]; compression?: Compression; blob?: Buffer }

export interface BuiltImage {
  manifest: Buffer;
  manifestDigest: string;
  config: Buffer;
  configDigest: string;
  layerDigests: string[];
  diffIds: string[];
  /** Every blob (config and layers) by digest. */
  blobs: Map<string, Buffer>;
}

export const sha256 = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

export async function tarball(entries: TarEntry[]): Promise<Buffer> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  const done = new Promise<Buffer>((resolve, reject) => {
    pack.on('data', (c: unknown) => chunks.push(c as Buffer));
    pack.on('end', () => resolve(Buffer.concat(chunks)));
    pack.on('error', reject);
  });
  for (const e of entries) {
    const type = e.type ?? (e.data !== undefined ? 'file' : 'directory');
    const data = e.data === undefined ? undefined : Buffer.from(e.data);
    const header = {
      name: e.name, type, mode: e.mode ?? (type === 'directory' ? 0o755 : 0o644), linkname: e.linkname,
      uid: e.uid ?? 0, gid: e.gid ?? 0, mtime: e.mtime ?? new Date(1_600_000_000_000), devmajor: e.devmajor, devminor: e.devminor,
      pax: e.pax,
    };
    if (type === 'file') pack.entry(header, data ?? Buffer.alloc(0));
    else pack.entry(header);
  }
  pack.finalize();
  return done;
}

async function compress(b: Buffer, c: Compression): Promise<Buffer> {
  if (c === 'gzip') return gzipSync(b, { level: 1 });
  if (c === 'zstd') return (await execa('zstd', ['-c', '-q', '-1'], { input: b, encoding: 'buffer' })).stdout as Buffer;
  return b;
}

const LAYER_TYPE: Record<Compression, string> = {
  gzip: 'application/vnd.oci.image.layer.v1.tar+gzip',
  zstd: 'application/vnd.oci.image.layer.v1.tar+zstd',
  none: 'application/vnd.oci.image.layer.v1.tar',
};

export async function buildImage(layers: TestLayer[], config: Record<string, unknown> = {}, platform: Platform = HOST_PLATFORM): Promise<BuiltImage> {
  const blobs = new Map<string, Buffer>();
  const descs = [];
  const diffIds: string[] = [];
  for (const l of layers) {
    const c = l.compression ?? 'gzip';
    const raw = l.blob ?? (await tarball(l.entries));
    const blob = l.blob ?? (await compress(raw, c));
    diffIds.push(sha256(raw));
    blobs.set(sha256(blob), blob);
    descs.push({ mediaType: LAYER_TYPE[c], digest: sha256(blob), size: blob.length });
  }
  const cfg = Buffer.from(JSON.stringify({ ...platform, config, rootfs: { type: 'layers', diff_ids: diffIds } }));
  blobs.set(sha256(cfg), cfg);
  const manifest = Buffer.from(JSON.stringify({
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: sha256(cfg), size: cfg.length },
    layers: descs,
  }));
  return { manifest, manifestDigest: sha256(manifest), config: cfg, configDigest: sha256(cfg), layerDigests: descs.map((d) => d.digest), diffIds, blobs };
}

/** A layer with /bin/busybox and a few applet symlinks: enough to run `sh -c`. */
export async function busyboxLayer(): Promise<TestLayer> {
  const busybox = await readFile('/bin/busybox');
  return {
    entries: [
      { name: 'bin/', type: 'directory' },
      { name: 'bin/busybox', data: busybox, mode: 0o755 },
      ...['sh', 'ls', 'cat', 'echo'].map((a) => ({ name: `bin/${a}`, type: 'symlink' as const, linkname: 'busybox' })),
      { name: 'etc/', type: 'directory' },
      { name: 'etc/passwd', data: 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' },
      { name: 'tmp/', type: 'directory', mode: 0o1777 },
    ],
  };
}

async function send(url: string, init: RequestInit, authorization: string | undefined, ok: number[]): Promise<Response> {
  const headers = new Headers(init.headers);
  if (authorization) headers.set('authorization', authorization);
  const res = await fetch(url, { ...init, headers });
  if (!ok.includes(res.status)) throw new Error(`${init.method ?? 'GET'} ${url}: ${res.status} ${await res.text()}`);
  return res;
}

export async function pushBlob(reg: TestRegistry, repository: string, blob: Buffer, digest = sha256(blob)): Promise<void> {
  const authz = await reg.pushAuthorization(repository);
  const head = await fetch(`${reg.url}/v2/${repository}/blobs/${digest}`, { method: 'HEAD', headers: authz ? { authorization: authz } : {} });
  if (head.status === 200) return;
  const start = await send(`${reg.url}/v2/${repository}/blobs/uploads/`, { method: 'POST' }, authz, [202]);
  const location = new URL(start.headers.get('location')!, reg.url);
  location.searchParams.set('digest', digest);
  await send(location.toString(), { method: 'PUT', body: new Uint8Array(blob), headers: { 'content-type': 'application/octet-stream' } }, authz, [201]);
}

export async function pushManifest(reg: TestRegistry, repository: string, reference: string, body: Buffer, mediaType: string): Promise<void> {
  const authz = await reg.pushAuthorization(repository);
  await send(`${reg.url}/v2/${repository}/manifests/${reference}`, { method: 'PUT', body: new Uint8Array(body), headers: { 'content-type': mediaType } }, authz, [201]);
}

/** Pushes the image's blobs and manifest and tags it (each of `tags`). */
export async function pushImage(reg: TestRegistry, repository: string, tags: string[], img: BuiltImage): Promise<void> {
  for (const [digest, blob] of img.blobs) await pushBlob(reg, repository, blob, digest);
  for (const tag of tags.length ? tags : [img.manifestDigest]) {
    await pushManifest(reg, repository, tag, img.manifest, 'application/vnd.oci.image.manifest.v1+json');
  }
}

/** Pushes several images under one index with their platforms; returns the index digest. */
export async function pushIndex(reg: TestRegistry, repository: string, tag: string, entries: Array<{ image: BuiltImage; platform: Platform }>): Promise<string> {
  for (const { image } of entries) await pushImage(reg, repository, [], image);
  const index = Buffer.from(JSON.stringify({
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.index.v1+json',
    manifests: entries.map(({ image, platform }) => ({
      mediaType: 'application/vnd.oci.image.manifest.v1+json', digest: image.manifestDigest, size: image.manifest.length, platform,
    })),
  }));
  await pushManifest(reg, repository, tag, index, 'application/vnd.oci.image.index.v1+json');
  return sha256(index);
}

/** Path of a blob's data file in the registry's storage (to corrupt it). */
export function registryBlobFile(reg: TestRegistry, digest: string): string {
  const hex = digest.slice('sha256:'.length);
  return `${reg.storage}/docker/registry/v2/blobs/sha256/${hex.slice(0, 2)}/${hex}/data`;
}
