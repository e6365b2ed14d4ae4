// OCI / Docker schema 2 manifests, indexes and image configs: media types and validation of what registries serve.
import { z } from 'zod';
import { InvalidArgument } from '../../core/errors.js';
import type { ImageConfig, Platform } from './types.js';

export const MediaType = {
  ociManifest: 'application/vnd.oci.image.manifest.v1+json',
  ociIndex: 'application/vnd.oci.image.index.v1+json',
  ociConfig: 'application/vnd.oci.image.config.v1+json',
  ociLayer: 'application/vnd.oci.image.layer.v1.tar',
  ociLayerGzip: 'application/vnd.oci.image.layer.v1.tar+gzip',
  ociLayerZstd: 'application/vnd.oci.image.layer.v1.tar+zstd',
  dockerManifest: 'application/vnd.docker.distribution.manifest.v2+json',
  dockerList: 'application/vnd.docker.distribution.manifest.list.v2+json',
  dockerConfig: 'application/vnd.docker.container.image.v1+json',
  dockerLayerGzip: 'application/vnd.docker.image.rootfs.diff.tar.gzip',
} as const;

/** What we send as Accept for manifests, most wanted first. */
export const MANIFEST_ACCEPT = [MediaType.ociIndex, MediaType.dockerList, MediaType.ociManifest, MediaType.dockerManifest].join(', ');

const DIGEST = z.string().regex(/^sha256:[a-f0-9]{64}$/, 'must be sha256:<64 hex>');

export const descriptorSchema = z.object({
  mediaType: z.string(),
  digest: DIGEST,
  size: z.number().int().nonnegative(),
  platform: z.object({ os: z.string(), architecture: z.string(), variant: z.string().optional() }).optional(),
});
export type Descriptor = z.infer<typeof descriptorSchema>;

/** An OCI image manifest's bytes: the config's digest and size, and the layers' descriptors, base first. */
export function buildImageManifest(config: { digest: string; size: number }, layers: Descriptor[]): Buffer {
  return Buffer.from(JSON.stringify({
    schemaVersion: 2,
    mediaType: MediaType.ociManifest,
    config: { mediaType: MediaType.ociConfig, ...config },
    layers,
  }));
}

const manifestSchema = z.object({
  schemaVersion: z.literal(2),
  mediaType: z.string().optional(),
  config: descriptorSchema,
  layers: z.array(descriptorSchema),
});
const indexSchema = z.object({
  schemaVersion: z.literal(2),
  mediaType: z.string().optional(),
  manifests: z.array(descriptorSchema),
});
export type Manifest = z.infer<typeof manifestSchema>;
export type Index = z.infer<typeof indexSchema>;

const LAYER_TYPES = new Set<string>([
  MediaType.ociLayer, MediaType.ociLayerGzip, MediaType.ociLayerZstd, MediaType.dockerLayerGzip,
  'application/vnd.oci.image.layer.nondistributable.v1.tar', 'application/vnd.oci.image.layer.nondistributable.v1.tar+gzip',
  'application/vnd.oci.image.layer.nondistributable.v1.tar+zstd', 'application/vnd.docker.image.rootfs.foreign.diff.tar.gzip',
]);

function parseJson(bytes: Buffer, what: string): unknown {
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    throw new InvalidArgument(`${what} is not valid JSON: ${(err as Error).message}`);
  }
}

function invalid(what: string, err: z.ZodError): InvalidArgument {
  const first = err.issues[0];
  return new InvalidArgument(`${what} is malformed: ${first ? `${first.path.join('.') || '(root)'}: ${first.message}` : err.message}`);
}

/** A manifest or an index, told apart by media type (header or body) and shape. */
export function parseManifestOrIndex(bytes: Buffer, contentType: string | undefined, what: string):
  { kind: 'index'; index: Index } | { kind: 'manifest'; manifest: Manifest } {
  const doc = parseJson(bytes, what) as { mediaType?: string; manifests?: unknown };
  const type = doc?.mediaType ?? contentType?.split(';')[0]?.trim();
  const isIndex = type === MediaType.ociIndex || type === MediaType.dockerList || (type === undefined && Array.isArray(doc?.manifests));
  if (isIndex) {
    const r = indexSchema.safeParse(doc);
    if (!r.success) throw invalid(what, r.error);
    return { kind: 'index', index: r.data };
  }
  if (type !== undefined && type !== MediaType.ociManifest && type !== MediaType.dockerManifest && type !== 'application/json') {
    throw new InvalidArgument(`${what} has unsupported media type "${type}" (schema 1 and artifacts cannot be run)`);
  }
  const r = manifestSchema.safeParse(doc);
  if (!r.success) throw invalid(what, r.error);
  for (const l of r.data.layers) {
    if (!LAYER_TYPES.has(l.mediaType)) {
      throw new InvalidArgument(`${what} has layer ${l.digest} of unsupported media type "${l.mediaType}"`);
    }
  }
  return { kind: 'manifest', manifest: r.data };
}

const configSchema = z.object({
  architecture: z.string().optional(),
  os: z.string().optional(),
  variant: z.string().optional(),
  config: z.object({
    User: z.string().nullish(),
    ExposedPorts: z.record(z.string(), z.unknown()).nullish(),
    Env: z.array(z.string()).nullish(),
    Entrypoint: z.array(z.string()).nullish(),
    Cmd: z.array(z.string()).nullish(),
    Volumes: z.record(z.string(), z.unknown()).nullish(),
    WorkingDir: z.string().nullish(),
    Labels: z.record(z.string(), z.string()).nullish(),
    StopSignal: z.string().nullish(),
  }).nullish(),
  rootfs: z.object({ type: z.literal('layers'), diff_ids: z.array(DIGEST) }),
});

export interface ParsedConfig { config: ImageConfig; diffIds: string[]; platform: Platform }

export function parseImageConfig(bytes: Buffer, what: string): ParsedConfig {
  const r = configSchema.safeParse(parseJson(bytes, what));
  if (!r.success) throw invalid(what, r.error);
  const c = r.data.config ?? {};
  return {
    config: {
      entrypoint: c.Entrypoint ?? [],
      cmd: c.Cmd ?? [],
      env: c.Env ?? [],
      workingDir: c.WorkingDir ?? '',
      user: c.User ?? '',
      exposedPorts: Object.keys(c.ExposedPorts ?? {}),
      volumes: Object.keys(c.Volumes ?? {}),
      stopSignal: c.StopSignal ?? '',
      labels: c.Labels ?? {},
    },
    diffIds: r.data.rootfs.diff_ids,
    platform: { os: r.data.os ?? '', architecture: r.data.architecture ?? '', variant: r.data.variant },
  };
}

/** A manifest (or index) or an image config to parse and check, as bytes that can cross to a worker. */
export type DocumentJob =
  | { kind: 'manifest'; bytes: Uint8Array; contentType: string | undefined; what: string }
  | { kind: 'config'; bytes: Uint8Array; what: string };

export type ParsedDocument<J extends DocumentJob> = J extends { kind: 'config' } ? ParsedConfig : ReturnType<typeof parseManifestOrIndex>;

export function parseDocument<J extends DocumentJob>(job: J): ParsedDocument<J> {
  const bytes = Buffer.from(job.bytes.buffer, job.bytes.byteOffset, job.bytes.byteLength);
  const parsed = job.kind === 'config' ? parseImageConfig(bytes, job.what) : parseManifestOrIndex(bytes, job.contentType, job.what);
  return parsed as ParsedDocument<J>;
}

/** The OCI config JSON for an image we build ourselves (local imports). */
export function buildImageConfig(config: ImageConfig, diffIds: string[], platform: Platform): Record<string, unknown> {
  const set = (keys: string[]) => (keys.length ? Object.fromEntries(keys.map((k) => [k, {}])) : undefined);
  return {
    architecture: platform.architecture,
    os: platform.os,
    config: {
      User: config.user || undefined,
      ExposedPorts: set(config.exposedPorts),
      Env: config.env.length ? config.env : undefined,
      Entrypoint: config.entrypoint.length ? config.entrypoint : undefined,
      Cmd: config.cmd.length ? config.cmd : undefined,
      Volumes: set(config.volumes),
      WorkingDir: config.workingDir || undefined,
      Labels: Object.keys(config.labels).length ? config.labels : undefined,
      StopSignal: config.stopSignal || undefined,
    },
    rootfs: { type: 'layers', diff_ids: diffIds },
  };
}
