// The daemon's configuration: built-in defaults, overlaid by a TOML file, overlaid by flags.
// Everything is validated up front so a typo stops the daemon at start, naming the key.
import { readFileSync } from 'node:fs';
import { parse as parseToml, TomlError } from 'smol-toml';
import { z } from 'zod';
import { DEFAULT_CONCURRENT_DOWNLOADS, DEFAULT_REGISTRY_LIMITS as LIMITS } from '../oci/image/limits.js';
import { MINICRI_PROFILE } from '../oci/runtime/apparmor/profile.js';
import { DEFAULT_LIMITS } from '../streaming/limits.js';

export const DEFAULT_CONFIG_PATH = '/etc/minicri/minicri.toml';

const absolutePath = z.string().regex(/^\//, 'must be an absolute path');
const logLevel = z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']);
const cidr = z.string().regex(/^[0-9a-fA-F:.]+\/\d{1,3}$/, 'must be a CIDR such as 10.88.0.0/16');

// Metrics are for the node's own scraper: a unix socket, or a port on loopback only.
const LOOPBACK_PORT = /^(?:127(?:\.\d{1,3}){3}|localhost|\[::1\]):(\d{1,5})$/;
const metricsAddress = z.string().refine(
  (a) => a === '' || a.startsWith('/') || Number(LOOPBACK_PORT.exec(a)?.[1] ?? NaN) <= 65535,
  'must be empty (off), an absolute unix socket path, or a loopback "host:port" such as 127.0.0.1:9110 or [::1]:9110',
);

const runtimeHandler = z.strictObject({
  path: z.string().min(1).default('runc'),
  root: absolutePath.optional(),
});

const mirror = z.strictObject({
  endpoints: z.array(z.string().url()).default([]),
  mirrors_only: z.boolean().default(false),
});

const schema = z.strictObject({
  socket: absolutePath.default('/run/minicri/minicri.sock'),
  root_dir: absolutePath.default('/var/lib/minicri'),
  state_dir: absolutePath.default('/run/minicri'),
  // Containers' writable layers (overlay upper and work dirs); on another filesystem than root_dir, the
  // image and container filesystems are split (KEP-4191). Unset: beside the images in root_dir.
  writable_layers_dir: absolutePath.optional(),
  // How old a writable layer's usage (ContainerStats, ImageFsInfo) may be: walking a layer of millions of
  // files on every call would hold the daemon up; a walk is also cut after 1 s of a call and goes on at the next.
  writable_layer_usage_max_age_seconds: z.number().nonnegative().max(3600).default(10),
  // Keep each pulled layer's compressed blob beside the unpacked layer (containerd does unless told to discard
  // unpacked layers; CRI-O does not). Nothing minicri serves reads them: off, a pull writes only the layers.
  keep_layer_blobs: z.boolean().default(false),
  // Once started and quiet, pull a generated image of about 32 MB from a registry of the daemon's own and delete
  // it, then keep the two unpack workers (oci/image/warm-up.ts): pulls after it, however far apart, run on
  // optimized code. Costs about half a second of CPU at each start and about 40 MiB of daemon memory for good;
  // off, the workers end five minutes after a pull.
  warm_up_pulls: z.boolean().default(true),
  // Where pods' network namespaces are pinned; iproute2's directory, so `ip netns` sees them.
  netns_dir: absolutePath.default('/var/run/netns'),
  log_level: logLevel.default('info'),
  cgroup_driver: z.enum(['cgroupfs', 'systemd']).default('cgroupfs'),
  conmon_path: z.string().min(1).default('conmon'),
  // The CRIU runc dumps and restores with (`runc --criu`): a name looked up in PATH, or a path. One that passes
  // `criu check` on this kernel is needed for CheckpointContainer and for restores.
  criu_path: z.string().min(1).default('criu'),
  // Containers restored from checkpoint archives (CreateContainer whose image names one). Off by default: the
  // archive's memory and files become a running process on this node, so only archives in archive_dir (where
  // kubelet writes its checkpoints) are taken.
  restore: z.strictObject({
    enabled: z.boolean().default(false),
    archive_dir: absolutePath.default('/var/lib/kubelet/checkpoints'),
    // The largest archive taken; a bigger one is refused before anything is unpacked.
    max_archive_bytes: z.number().int().positive().default(16 * 1024 ** 3),
    // An archive restores only into a pod of the namespace it was checkpointed in, which minicri records in its
    // config.dump. Archives with no such record (CRI-O's, Podman's, older minicri's) are refused unless this is on.
    allow_foreign_archives: z.boolean().default(false),
  }).prefault({}),
  pause_image: z.string().default(''),
  default_runtime: z.string().min(1).default('runc'),
  runtimes: z.record(z.string(), runtimeHandler).default({ runc: { path: 'runc' } }),
  pod_subnet: cidr.default('10.88.0.0/16'),
  // The AppArmor profile RuntimeDefault (and a pod naming none) gets. minicri loads its own at start; another
  // name is used as it is and must be loaded by the operator.
  apparmor_profile: z.string().regex(/^[^\s()]+$/, 'must be an AppArmor profile name (no spaces or parentheses)').default(MINICRI_PROFILE),
  cni: z.strictObject({
    conf_dir: absolutePath.default('/etc/cni/net.d'),
    bin_dirs: z.array(absolutePath).min(1).default(['/opt/cni/bin', '/usr/lib/cni']),
    cache_dir: absolutePath.default('/var/lib/cni'),
    default_network: z.string().default(''),
    plugin_timeout_seconds: z.number().int().positive().max(600).default(60),
    // On the very first start with an empty conf dir, write a bridge network for pod_subnet.
    // Off for nodes whose CNI installs its own config later (a CNI daemonset).
    write_default_network: z.boolean().default(true),
    // NetworkAttachmentDefinitions (YAML or JSON) that pods name in k8s.v1.cni.cncf.io/networks.
    networks_dir: absolutePath.default('/etc/minicri/networks.d'),
    // kubelet's pod-resources API, asked for the devices of pods with device-backed networks only.
    pod_resources_socket: absolutePath.default('/var/lib/kubelet/pod-resources/kubelet.sock'),
  }).prefault({}),
  registries: z.strictObject({
    // Layers downloaded (and unpacked) at once, across all pulls.
    max_concurrent_downloads: z.number().int().positive().max(64).default(DEFAULT_CONCURRENT_DOWNLOADS),
    insecure: z.array(z.string().min(1)).default([]),
    mirrors: z.record(z.string(), mirror).default({}),
    // Node-level credentials (Docker config.json `auths`): the pause image, mirrors, pulls sent without auth.
    auth_file: absolutePath.default('/etc/minicri/auth.json'),
    // Per-host TLS: <certs_dir>/<host[:port]>/{ca.crt,*.crt,client.cert,client.key}, as containerd and CRI-O read it.
    certs_dir: absolutePath.default('/etc/minicri/certs.d'),
    // A blob download that receives no byte for this long fails over to the next endpoint.
    stall_timeout_seconds: z.number().positive().max(3600).default(60),
    // How often a pull still running logs its progress.
    progress_interval_seconds: z.number().positive().max(3600).default(10),
    // What a pull reads of a registry at most (oci/image/limits.ts): error and token bodies, a manifest or an
    // index, an image config, the layers of a manifest (a page of overlay mount data holds about 210).
    max_response_bytes: z.number().int().min(4096).default(LIMITS.responseBytes),
    max_manifest_bytes: z.number().int().min(4096).default(LIMITS.manifestBytes),
    max_config_bytes: z.number().int().min(4096).default(LIMITS.configBytes),
    max_layers: z.number().int().positive().max(500).default(LIMITS.layers),
    // Registry tokens kept (least recently used dropped first), each at most this long whatever it says.
    token_cache_entries: z.number().int().nonnegative().default(LIMITS.tokenCacheEntries),
    token_cache_max_seconds: z.number().int().nonnegative().default(LIMITS.tokenLifetimeSeconds),
  }).prefault({}),
  // Prometheus text endpoint (GET /metrics); empty: off, and prom-client is never loaded.
  metrics_address: metricsAddress.default(''),
  // Events a GetContainerEvents subscriber may have waiting (it reads slower than they come) before its
  // stream is ended with RESOURCE_EXHAUSTED; kubelet then relists and subscribes again.
  container_events_buffer: z.number().int().positive().max(1_000_000).default(1000),
  // A user-namespaced pod mapped onto host ids below 65536 (critest's 0:1000:100000; kubelet allocates from
  // 65536 up) runs with a warning in the log; true refuses it with INVALID_ARGUMENT.
  userns_refuse_host_id_overlap: z.boolean().default(false),
  cdi: z.strictObject({
    // CDI spec files (JSON or YAML); a later directory's device overrides an earlier one's of the same name.
    spec_dirs: z.array(absolutePath).default(['/etc/cdi', '/var/run/cdi']),
  }).prefault({}),
  streaming: z.strictObject({
    address: z.string().min(1).default('127.0.0.1'),
    port: z.number().int().min(0).max(65535).default(0),
    idle_timeout_seconds: z.number().int().positive().default(4 * 3600),
    // Exec, attach and port-forward sessions open at once; more are refused (HTTP 429).
    max_sessions: z.number().int().positive().default(DEFAULT_LIMITS.maxSessions),
    // The same, per container (exec, attach) or pod sandbox (port-forward), so one tenant cannot take them all.
    max_sessions_per_container: z.number().int().positive().default(DEFAULT_LIMITS.maxSessionsPerTarget),
    // Forwarded connections (SPDY stream pairs, WebSocket ports) one port-forward session has open at once.
    max_port_forward_pairs: z.number().int().positive().max(65_536).default(DEFAULT_LIMITS.maxPortForwardPairs),
    // Client input a session holds while its reader (a process's stdin, a pod connection) is behind; past
    // it the client's connection is paused until the reader catches up.
    input_buffer_bytes: z.number().int().min(64 * 1024).max(256 << 20).default(DEFAULT_LIMITS.inputBufferBytes),
    // The largest SPDY frame payload or WebSocket message accepted; a larger one closes the session.
    max_frame_bytes: z.number().int().min(64 * 1024).max(0xffffff).default(DEFAULT_LIMITS.maxFrameBytes),
  }).prefault({}),
}).superRefine((c, ctx) => {
  if (!(c.default_runtime in c.runtimes)) {
    ctx.addIssue({
      code: 'custom', path: ['default_runtime'], message: `names no entry of [runtimes] (have: ${Object.keys(c.runtimes).join(', ')})`,
    });
  }
});

export type Config = z.infer<typeof schema>;

export class ConfigError extends Error {}

/** Flags that override a config key, as `--flag value`. */
export const CONFIG_FLAGS: Record<string, string> = {
  socket: 'socket',
  'root-dir': 'root_dir',
  'state-dir': 'state_dir',
  'log-level': 'log_level',
  'cgroup-driver': 'cgroup_driver',
  'conmon-path': 'conmon_path',
  'criu-path': 'criu_path',
  'pause-image': 'pause_image',
  'pod-subnet': 'pod_subnet',
  'cni-conf-dir': 'cni.conf_dir',
  'cni-bin-dir': 'cni.bin_dirs',
  'cni-cache-dir': 'cni.cache_dir',
  'streaming-address': 'streaming.address',
  'metrics-address': 'metrics_address',
};

/** Validates a raw config object; the error names every offending key. */
export function parseConfig(raw: unknown): Config {
  const result = schema.safeParse(raw);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => {
    const at = issue.path.join('.');
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((k) => `unknown config key "${at ? `${at}.` : ''}${k}"`).join('; ');
    }
    return `config key "${at}": ${issue.message}`;
  });
  throw new ConfigError(problems.join('; '));
}

/** Sets `dotted.key` in a nested object; list-valued keys take a comma-separated value. */
function setDotted(target: Record<string, unknown>, dotted: string, value: string): void {
  const parts = dotted.split('.');
  let node = target;
  for (const part of parts.slice(0, -1)) {
    if (typeof node[part] !== 'object' || node[part] === null) node[part] = {};
    node = node[part] as Record<string, unknown>;
  }
  node[parts[parts.length - 1]] = dotted === 'cni.bin_dirs' ? value.split(',') : value;
}

/** Reads the TOML file (absent = defaults unless it was asked for by name) and applies flag overrides. */
export function loadConfig(path: string | undefined, overrides: Record<string, string>): Config {
  let raw: Record<string, unknown> = {};
  const file = path ?? DEFAULT_CONFIG_PATH;
  let text: string | undefined;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || path !== undefined) {
      throw new ConfigError(`cannot read config file ${file}: ${(err as Error).message}`);
    }
  }
  if (text !== undefined) {
    try {
      raw = parseToml(text) as Record<string, unknown>;
    } catch (err) {
      const where = err instanceof TomlError ? ` (line ${err.line}, column ${err.column})` : '';
      throw new ConfigError(`config file ${file} is not valid TOML${where}: ${(err as Error).message.split('\n')[0]}`);
    }
  }
  for (const [key, value] of Object.entries(overrides)) setDotted(raw, key, value);
  try {
    return parseConfig(raw);
  } catch (err) {
    throw new ConfigError(`${file}: ${(err as Error).message}`);
  }
}

/** The runc root a handler uses: its own setting or a directory under the state dir (apart from
 * the runtime's exit files and sockets, which runc would take for containers). */
export function runtimeRoot(config: Config, handler: string): string {
  return config.runtimes[handler]?.root ?? `${config.state_dir}/runc/${handler}`;
}
