// Shapes shared by the image service and whoever persists or consumes it (the CRI server, container creation).

/** The parts of an OCI image config a container is created from. */
export interface ImageConfig {
  entrypoint: string[];
  cmd: string[];
  env: string[];
  workingDir: string;
  user: string;
  exposedPorts: string[];
  volumes: string[];
  stopSignal: string;
  labels: Record<string, string>;
}

export interface ImageRecord {
  /** Digest of the image config ("sha256:…"); the image id CRI reports. */
  id: string;
  /** Normalized `name:tag` references, under the name the client asked for. */
  repoTags: string[];
  /** Normalized `name@sha256:…` references (digest of the manifest or index that was pulled). */
  repoDigests: string[];
  /** Bytes of config and layer blobs as served by the registry. */
  size: number;
  config: ImageConfig;
  /** Layer diff ids (uncompressed digests), bottom first: the unpacked layers a rootfs stacks. */
  layers: string[];
  /** Every blob the image keeps in the content store: manifests, config, compressed layers. */
  blobs: string[];
  pinned: boolean;
  /** Unix milliseconds of the first pull or import. */
  createdAt: number;
}

/** Persistence of image records; the daemon's sqlite store implements it, tests use a Map. */
export interface ImageRepository {
  get(id: string): ImageRecord | undefined;
  list(): ImageRecord[];
  put(r: ImageRecord): void;
  delete(id: string): void;
}

export interface RegistryHostsConfig {
  /**
   * Per registry host (e.g. "docker.io", "registry.k8s.io"): endpoints tried in order before the registry itself,
   * as "host[:port]" or "http(s)://host[:port]". With mirrorsOnly the registry itself is never contacted.
   */
  mirrors: Record<string, { endpoints: string[]; mirrorsOnly?: boolean }>;
  /** Hosts ("host[:port]") spoken to over plain HTTP. localhost and 127.0.0.0/8 always are. */
  insecure: string[];
  /** A Docker config.json whose `auths` authenticate the node's own pulls and its mirrors; missing: none. */
  authFile?: string;
  /** Per-host CA certificates and client certificates: <certsDir>/<host[:port]>/ (see tls.ts). */
  certsDir?: string;
}

/** CRI AuthConfig, as kubelet sends it with PullImage. */
export interface AuthConfig {
  username?: string;
  password?: string;
  /** base64 of "username:password". */
  auth?: string;
  serverAddress?: string;
  /** OAuth2 refresh token, exchanged at the registry's token endpoint. */
  identityToken?: string;
  /** Bearer token sent to the registry as is. */
  registryToken?: string;
}

export interface Platform {
  os: string;
  architecture: string;
  variant?: string;
}
