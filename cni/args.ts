// What a plugin is given besides its binary: CNI_ARGS, capability args (runtimeConfig), and the
// stdin config built from the network list. All pure.
import { InvalidArgument } from '../core/errors.js';
import { isObject, withPluginConfigs, type NetworkList, type PluginConf } from './config.js';

export interface PodIdentity {
  sandboxId: string;
  name: string;
  namespace: string;
  uid: string;
}

export interface PortMapping {
  protocol: 'tcp' | 'udp' | 'sctp';
  containerPort: number;
  hostPort: number;
  hostIp: string;
}

export interface CapabilityInput {
  portMappings: PortMapping[];
  annotations: Record<string, string>;
  cgroupParent?: string;
  /** Pod CIDR(s) from kubelet, comma separated for dual stack. */
  podCidr?: string;
}

/** CNI_ARGS as ordered pairs (the form cached by libcni). */
export function cniArgs(pod: PodIdentity): [string, string][] {
  return [
    ['IgnoreUnknown', '1'],
    ['K8S_POD_NAMESPACE', pod.namespace],
    ['K8S_POD_NAME', pod.name],
    ['K8S_POD_INFRA_CONTAINER_ID', pod.sandboxId],
    ['K8S_POD_UID', pod.uid],
  ];
}

/**
 * A pod's `cni-args` as the network allows them: an address or MAC given there (`IP`, `ips`, `MAC`, as the
 * static and host-local IPAM plugins read them from CNI_ARGS or `args.cni`) would let a pod choose its
 * address on a network whose definition never offered that, so each passes only when a plugin of the network
 * declares the matching capability (`ips`, `mac`), as the selection's own `ips` and `mac` do.
 */
export function allowedCniArgs(args: Record<string, string> | undefined, list: NetworkList): Record<string, string> | undefined {
  if (!args) return undefined;
  const declared = new Set(list.plugins.flatMap((p) => p.capabilities));
  const gate = (key: string) => CAPABILITY_OF_ARG[key.toLowerCase()];
  const kept = Object.entries(args).filter(([key]) => {
    const cap = gate(key);
    return cap === undefined || declared.has(cap);
  });
  return kept.length > 0 ? Object.fromEntries(kept) : undefined;
}

/** The cni-args keys (any case) that set what a capability sets, and that capability. */
const CAPABILITY_OF_ARG: Record<string, string> = { ip: 'ips', ips: 'ips', mac: 'mac' };

export function cniArgsString(pairs: [string, string][]): string {
  return pairs.map(([k, v]) => `${k}=${v}`).join(';');
}

/**
 * The list with a pod's `cni-args` also in each plugin's config under `args.cni` (merged over what the
 * definition has there), where multus puts them and plugins that take arguments from their config read them.
 */
export function withArgsCni(list: NetworkList, extra: Record<string, string> | undefined): NetworkList {
  if (!extra || Object.keys(extra).length === 0) return list;
  return withPluginConfigs(list, (raw) => {
    const args = isObject(raw.args) ? raw.args : {};
    const cni = isObject(args.cni) ? args.cni : {};
    return { ...raw, args: { ...args, cni: { ...cni, ...extra } } };
  });
}

export const INGRESS_BANDWIDTH_ANNOTATION = 'kubernetes.io/ingress-bandwidth';
export const EGRESS_BANDWIDTH_ANNOTATION = 'kubernetes.io/egress-bandwidth';
/** Bursts are not expressible in pod annotations; like other runtimes we leave them effectively unlimited. */
const UNLIMITED_BURST = 4294967295;

/** Every capability value the runtime can offer for this pod; each plugin later picks what it declares. */
export function capabilityArgs(input: CapabilityInput): Record<string, unknown> {
  const caps: Record<string, unknown> = {};
  // Only ports published on the host need a mapping.
  const ports = input.portMappings
    .filter((p) => p.hostPort > 0)
    .map(({ hostPort, containerPort, protocol, hostIp }) => ({ hostPort, containerPort, protocol, ...(hostIp ? { hostIP: hostIp } : {}) }));
  if (ports.length > 0) caps.portMappings = ports;
  const bandwidth = bandwidthFromAnnotations(input.annotations);
  if (bandwidth) caps.bandwidth = bandwidth;
  if (input.podCidr) {
    caps.ipRanges = input.podCidr
      .split(',')
      .map((c) => c.trim())
      .filter((c) => c !== '')
      .map((subnet) => [{ subnet }]);
  }
  if (input.cgroupParent) caps.cgroupPath = input.cgroupParent;
  caps['io.kubernetes.cri.pod-annotations'] = input.annotations;
  return caps;
}

/** runtimeConfig for one plugin: the capability args it declares, nothing else. */
export function runtimeConfigFor(plugin: PluginConf, caps: Record<string, unknown>): Record<string, unknown> | undefined {
  const rc: Record<string, unknown> = {};
  for (const cap of plugin.capabilities) if (cap in caps) rc[cap] = caps[cap];
  return Object.keys(rc).length > 0 ? rc : undefined;
}

/** The stdin of one plugin call: its config with the list's name and version, prevResult, runtimeConfig and extras. */
export function pluginStdin(
  list: NetworkList,
  plugin: PluginConf,
  opts: { prevResult?: Record<string, unknown>; capabilityArgs?: Record<string, unknown>; extra?: Record<string, unknown> } = {},
): Buffer {
  const conf: Record<string, unknown> = { ...plugin.raw, name: list.name, cniVersion: list.cniVersion };
  if (opts.prevResult) conf.prevResult = opts.prevResult;
  const rc = opts.capabilityArgs && runtimeConfigFor(plugin, opts.capabilityArgs);
  if (rc) conf.runtimeConfig = rc;
  Object.assign(conf, opts.extra);
  return Buffer.from(JSON.stringify(conf));
}

/** The bandwidth capability from the pod annotations, in bits per second, as kubelet validates them. */
export function bandwidthFromAnnotations(annotations: Record<string, string>):
  | { ingressRate?: number; ingressBurst?: number; egressRate?: number; egressBurst?: number }
  | undefined {
  const out: { ingressRate?: number; ingressBurst?: number; egressRate?: number; egressBurst?: number } = {};
  const ingress = annotations[INGRESS_BANDWIDTH_ANNOTATION];
  const egress = annotations[EGRESS_BANDWIDTH_ANNOTATION];
  if (ingress !== undefined) {
    out.ingressRate = bandwidthBits(ingress, INGRESS_BANDWIDTH_ANNOTATION);
    out.ingressBurst = UNLIMITED_BURST;
  }
  if (egress !== undefined) {
    out.egressRate = bandwidthBits(egress, EGRESS_BANDWIDTH_ANNOTATION);
    out.egressBurst = UNLIMITED_BURST;
  }
  return ingress === undefined && egress === undefined ? undefined : out;
}

const MIN_BANDWIDTH = 1000n; // 1k
const MAX_BANDWIDTH = 10n ** 15n; // 1P

function bandwidthBits(value: string, annotation: string): number {
  const bits = parseQuantity(value, annotation);
  if (bits < MIN_BANDWIDTH) throw new InvalidArgument(`annotation ${annotation}=${value} is unreasonably small (< 1kbit)`);
  if (bits > MAX_BANDWIDTH) throw new InvalidArgument(`annotation ${annotation}=${value} is unreasonably large (> 1Pbit)`);
  return Number(bits);
}

const BINARY_SUFFIX: Record<string, bigint> = { Ki: 1n << 10n, Mi: 1n << 20n, Gi: 1n << 30n, Ti: 1n << 40n, Pi: 1n << 50n, Ei: 1n << 60n };
const DECIMAL_EXP: Record<string, number> = { n: -9, u: -6, m: -3, '': 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

/**
 * A Kubernetes resource quantity ("10M", "1.5Gi", "100m", "2e3") as an integer, rounded up away from zero
 * the way Quantity.Value() does. Exact: decimal arithmetic on BigInt.
 */
export function parseQuantity(value: string, what = 'quantity'): bigint {
  const m = /^([+-]?)(\d+\.?\d*|\.\d+)(?:(Ki|Mi|Gi|Ti|Pi|Ei)|([numkMGTPE]?)|[eE]([+-]?\d+))$/.exec(value.trim());
  if (!m) throw new InvalidArgument(`${what} ${JSON.stringify(value)} is not a valid quantity (e.g. 10M, 1Gi, 500k)`);
  const [, sign, number, binary, decimal, exponent] = m;
  const [whole, frac = ''] = number!.split('.');
  let numerator = BigInt(`${whole || '0'}${frac}`);
  let exp10 = -frac.length;
  if (binary) numerator *= BINARY_SUFFIX[binary]!;
  else if (exponent !== undefined) exp10 += Number(exponent);
  else exp10 += DECIMAL_EXP[decimal ?? '']!;
  if (Math.abs(exp10) > 100) throw new InvalidArgument(`${what} ${JSON.stringify(value)} is out of range`);
  let magnitude: bigint;
  if (exp10 >= 0) magnitude = numerator * 10n ** BigInt(exp10);
  else {
    const d = 10n ** BigInt(-exp10);
    magnitude = (numerator + d - 1n) / d;
  }
  return sign === '-' ? -magnitude : magnitude;
}

/** Capabilities that belong to the default network alone: the pod's host ports, bandwidth and kubelet's pod CIDR. */
const DEFAULT_NETWORK_ONLY = ['portMappings', 'bandwidth', 'ipRanges'];

/**
 * The capability args of a secondary attachment: the pod-wide ones (cgroup, annotations), plus what its
 * selection asks for (ips, mac, portMappings, bandwidth) and the device it was given.
 */
export function attachmentCapabilityArgs(
  podCaps: Record<string, unknown>,
  selection: { ips?: string[]; mac?: string; portMappings?: unknown[]; bandwidth?: unknown },
  deviceId?: string,
): Record<string, unknown> {
  const caps = Object.fromEntries(Object.entries(podCaps).filter(([k]) => !DEFAULT_NETWORK_ONLY.includes(k)));
  if (selection.ips) caps.ips = selection.ips;
  if (selection.mac) caps.mac = selection.mac;
  if (selection.portMappings) caps.portMappings = selection.portMappings;
  if (selection.bandwidth) caps.bandwidth = selection.bandwidth;
  if (deviceId) caps.deviceID = deviceId;
  return caps;
}
