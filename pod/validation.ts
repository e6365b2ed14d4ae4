// Request checks that come before anything touches the host, so a refused request leaves nothing.
import { isIP } from 'node:net';
import { isAbsolute } from 'node:path';
import type { ContainerConfig__Output } from '../gen/runtime/v1/ContainerConfig.js';
import type { ContainerMetadata__Output } from '../gen/runtime/v1/ContainerMetadata.js';
import type { PodSandboxConfig__Output } from '../gen/runtime/v1/PodSandboxConfig.js';
import type { PodSandboxMetadata__Output } from '../gen/runtime/v1/PodSandboxMetadata.js';
import { InvalidArgument } from '../core/errors.js';

/**
 * The runtime handler a request names, the default one for '' (RunPodSandbox, and ImageSpec.runtime_handler of the
 * image RPCs); one not configured is refused, as the CRI asks, naming those that are.
 */
export function runtimeHandlerNamed(requested: string, defaultHandler: string, configured: Iterable<string>): string {
  const handler = requested || defaultHandler;
  const known = [...configured];
  if (!known.includes(handler)) throw new InvalidArgument(`runtime handler "${handler}" is not configured (have: ${known.join(', ')})`);
  return handler;
}

/** Kubernetes object names are DNS subdomains: at most 253 characters. */
const MAX_NAME = 253;
/** kubelet refuses labels plus annotations over 256 KiB; so do we. */
const MAX_LABEL_BYTES = 256 * 1024;
function checkName(what: string, value: string): void {
  if (!value) throw new InvalidArgument(`${what} must not be empty`);
  if (value.length > MAX_NAME) throw new InvalidArgument(`${what} is ${value.length} characters long; at most ${MAX_NAME} are allowed`);
  if (/[\s/\\\0]/.test(value) || value === '.' || value === '..') {
    throw new InvalidArgument(`${what} "${value}" contains characters not allowed in a name`);
  }
}

export function checkPodMetadata(metadata: PodSandboxMetadata__Output | null): asserts metadata is PodSandboxMetadata__Output {
  if (!metadata) throw new InvalidArgument('sandbox config has no metadata: name, namespace and uid are required');
  checkName('sandbox metadata.name', metadata.name);
  checkName('sandbox metadata.namespace', metadata.namespace);
  checkName('sandbox metadata.uid', metadata.uid);
}

export function checkLabels(what: string, labels: Record<string, string>, annotations: Record<string, string>): void {
  let bytes = 0;
  for (const [key, value] of [...Object.entries(labels), ...Object.entries(annotations)]) {
    if (!key) throw new InvalidArgument(`${what} has a label or annotation with an empty key`);
    bytes += Buffer.byteLength(key) + Buffer.byteLength(value);
  }
  if (bytes > MAX_LABEL_BYTES) {
    throw new InvalidArgument(`${what} labels and annotations total ${bytes} bytes; at most ${MAX_LABEL_BYTES} are allowed`);
  }
}

export function checkPodSandboxConfig(
  config: PodSandboxConfig__Output | null,
): asserts config is PodSandboxConfig__Output & { metadata: PodSandboxMetadata__Output } {
  if (!config) throw new InvalidArgument('RunPodSandbox needs a config');
  checkPodMetadata(config.metadata);
  if (config.hostname && !/^[a-zA-Z0-9]([a-zA-Z0-9.-]{0,62})$/.test(config.hostname)) {
    throw new InvalidArgument(
      `hostname "${config.hostname}" is not a valid host name (letters, digits, '-' and '.', at most 63 characters)`,
    );
  }
  if (config.log_directory && (!isAbsolute(config.log_directory) || config.log_directory.split('/').includes('..'))) {
    throw new InvalidArgument(`log_directory "${config.log_directory}" must be an absolute path without ".."`);
  }
  for (const pm of config.port_mappings) {
    const where = `port mapping ${pm.host_port}->${pm.container_port}/${pm.protocol}`;
    if (!Number.isInteger(pm.container_port) || pm.container_port < 1 || pm.container_port > 65535) {
      throw new InvalidArgument(`${where}: container_port must be 1-65535`);
    }
    if (!Number.isInteger(pm.host_port) || pm.host_port < 0 || pm.host_port > 65535) {
      throw new InvalidArgument(`${where}: host_port must be 0-65535`);
    }
    if (pm.host_ip && isIP(pm.host_ip) === 0) throw new InvalidArgument(`${where}: host_ip "${pm.host_ip}" is not an IP address`);
  }
  for (const server of config.dns_config?.servers ?? []) {
    if (isIP(server) === 0) throw new InvalidArgument(`DNS server "${server}" is not an IP address`);
  }
  checkLabels('sandbox', config.labels, config.annotations);
}

export function checkContainerConfig(
  config: ContainerConfig__Output | null,
): asserts config is ContainerConfig__Output & { metadata: ContainerMetadata__Output } {
  if (!config) throw new InvalidArgument('CreateContainer needs a config');
  if (!config.metadata) throw new InvalidArgument('container config has no metadata: a name is required');
  checkName('container metadata.name', config.metadata.name);
  if (!config.image?.image) throw new InvalidArgument(`container "${config.metadata.name}" names no image`);
  for (const mount of config.mounts) {
    if (!mount.container_path || !isAbsolute(mount.container_path)) {
      throw new InvalidArgument(`mount container_path "${mount.container_path}" must be an absolute path`);
    }
    if (!mount.host_path && !mount.image) throw new InvalidArgument(`mount at "${mount.container_path}" has no host_path`);
    if (mount.host_path && !isAbsolute(mount.host_path)) {
      throw new InvalidArgument(`mount at "${mount.container_path}": host_path "${mount.host_path}" must be an absolute path`);
    }
    // As the CRI specifies it: recursive read-only only with readonly and private propagation.
    if (mount.recursive_read_only && !mount.readonly) {
      throw new InvalidArgument(`mount at "${mount.container_path}" asks for recursive read-only but is not read-only: set readonly too`);
    }
    if (mount.recursive_read_only && mount.propagation !== 'PROPAGATION_PRIVATE') {
      throw new InvalidArgument(
        `mount at "${mount.container_path}" asks for recursive read-only with propagation ${mount.propagation}: ` +
          'recursive read-only needs private propagation',
      );
    }
  }
  for (const env of config.envs) if (!env.key) throw new InvalidArgument('an environment variable has an empty name');
  checkLabels(`container "${config.metadata.name}"`, config.labels, config.annotations);
}
