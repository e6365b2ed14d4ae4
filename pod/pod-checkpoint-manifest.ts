// The directory CheckpointPod writes and RestorePod reads (minicri's own layout; the CRI leaves it to the runtime):
//   pod.json                 the manifest below, written last: a directory without it is no finished checkpoint
//   containers/<id>.tar      each container's checkpoint archive, in the layout CheckpointContainer writes (CRI-O's)
// The manifest records the pod as it ran (its config, namespace and runtime handler), every network attachment
// (network, interface, addresses with their prefix, MAC, device info) and, per container, its name, archive, base
// image and the process the request is expected to describe again. Everything here is pure: the manifest, its
// reading (a checkpoint directory is input like an archive is), and how a RestorePod request is matched to it.
import { FailedPrecondition, InvalidArgument } from '../core/errors.js';
import { assignInterfaces, NETWORKS_ANNOTATION, parseNetworkSelections, selectionElement } from '../cni/network-selection.js';
import type { SecondaryNetwork } from '../cni/manager.js';
import type { ContainerConfig__Output } from '../gen/runtime/v1/ContainerConfig.js';
import type { SandboxRecord } from './records.js';

export const POD_MANIFEST = 'pod.json';
export const CONTAINERS_DIR = 'containers';
export const MANIFEST_VERSION = 1;
/** More than this is not a manifest of ours (it holds a pod config and a few lines per container and network). */
export const MAX_MANIFEST_BYTES = 4 << 20;

/** One network attachment of the checkpointed pod. */
export interface CheckpointedAttachment {
  /** The network's name in the network status ("namespace/name" for a secondary one). */
  network: string;
  interface: string;
  /** Addresses with their prefix length ("10.1.1.5/24"), as a selection's `ips` asks for them. */
  cidrs: string[];
  mac?: string;
  default: boolean;
  /** The device a device-backed attachment had (the network status' device-info). */
  deviceInfo?: Record<string, unknown>;
}

export interface CheckpointedContainer {
  name: string;
  /** Its id in the checkpointed pod. */
  id: string;
  /** Relative to the checkpoint directory. */
  archive: string;
  image: { id: string; name: string };
  command: string[];
  args: string[];
  workingDir: string;
}

export interface PodCheckpointManifest {
  version: number;
  checkpointedAt: string;
  pod: { namespace: string; name: string; uid: string };
  runtimeHandler: string;
  /** The sandbox config it ran with (a restore takes the request's; this one is for people and tools). */
  config: unknown;
  networks: CheckpointedAttachment[];
  /** The DRA device status the pod's network set-up wrote, when it had device-backed networks. */
  devices?: unknown[];
  containers: CheckpointedContainer[];
  /** The dumps carried established TCP connections: the restore must restore them (`--tcp-established`). */
  tcpEstablished?: boolean;
}

/** The first entry `list` holds twice, if any; linear (a request's list may be long). Pure. */
export function firstRepeated(list: readonly string[]): string | undefined {
  const seen = new Set<string>();
  for (const x of list) {
    if (seen.has(x)) return x;
    seen.add(x);
  }
  return undefined;
}

/** A container's archive in the directory: named by its id, which is hex. */
export function containerArchive(id: string): string {
  return `${CONTAINERS_DIR}/${id}.tar`;
}
const ARCHIVE_NAME = new RegExp(`^${CONTAINERS_DIR}/[0-9a-f]{1,64}\\.tar$`);

interface StatusEntry {
  name?: unknown;
  interface?: unknown;
  ips?: unknown;
  mac?: unknown;
  default?: unknown;
  'device-info'?: unknown;
}

/**
 * The pod's attachments from its network status entries and its raw CNI results: the status names the network,
 * interface and addresses; the results give each address its prefix length.
 */
export function checkpointedAttachments(networkStatus: readonly unknown[], cniResults: readonly unknown[]): CheckpointedAttachment[] {
  const cidrs = cniResults.flatMap((r) => {
    const ips = (r as { ips?: unknown } | null)?.ips;
    const address = (ip: unknown) => (ip as { address?: unknown } | null)?.address;
    return Array.isArray(ips) ? ips.flatMap((ip) => { const a = address(ip); return typeof a === 'string' ? [a] : []; }) : [];
  });
  return networkStatus.flatMap((raw) => {
    const e = raw as StatusEntry;
    if (typeof e?.name !== 'string' || typeof e.interface !== 'string') return [];
    const ips = Array.isArray(e.ips) ? e.ips.filter((ip): ip is string => typeof ip === 'string') : [];
    return [{
      network: e.name,
      interface: e.interface,
      cidrs: ips.map((ip) => cidrs.find((c) => c.slice(0, c.lastIndexOf('/')) === ip) ?? ip),
      ...(typeof e.mac === 'string' ? { mac: e.mac } : {}),
      default: e.default === true,
      ...(e['device-info'] && typeof e['device-info'] === 'object' ? { deviceInfo: e['device-info'] as Record<string, unknown> } : {}),
    }];
  });
}

/** A sandbox's attachments, as its record holds them. */
export function attachmentsOf(sandbox: Pick<SandboxRecord, 'networkStatus' | 'cniResults'>): CheckpointedAttachment[] {
  return checkpointedAttachments(sandbox.networkStatus ?? [], sandbox.cniResults);
}

/** The manifest in pod.json, checked field by field: InvalidArgument naming what is wrong. */
export function parsePodManifest(text: string, what: string): PodCheckpointManifest {
  let m: Partial<Record<keyof PodCheckpointManifest, unknown>>;
  try {
    m = JSON.parse(text) as typeof m;
  } catch (err) {
    throw new InvalidArgument(`${what}: ${POD_MANIFEST} is not JSON: ${(err as Error).message}`);
  }
  const bad = (why: string) => new InvalidArgument(`${what}: ${POD_MANIFEST} ${why}; it is not a checkpoint CheckpointPod wrote`);
  if (!m || typeof m !== 'object') throw bad('is not an object');
  if (m.version !== MANIFEST_VERSION) throw bad(`has version ${JSON.stringify(m.version)}, not ${MANIFEST_VERSION}`);
  const pod = m.pod as Record<string, unknown> | undefined;
  if (!pod || !['namespace', 'name', 'uid'].every((k) => typeof pod[k] === 'string' && pod[k] !== '')) {
    throw bad('names no pod (namespace, name, uid)');
  }
  if (!Array.isArray(m.containers) || m.containers.length === 0) throw bad('lists no containers');
  const containers = m.containers.map((raw, i): CheckpointedContainer => {
    const c = raw as Record<string, unknown>;
    const strings = (v: unknown) => Array.isArray(v) && v.every((s) => typeof s === 'string');
    const image = c?.image as Record<string, unknown> | undefined;
    if (typeof c?.name !== 'string' || !c.name || typeof c.id !== 'string' || typeof c.archive !== 'string'
      || typeof image?.id !== 'string' || typeof image.name !== 'string' || !strings(c.command) || !strings(c.args)
      || typeof c.workingDir !== 'string') {
      throw bad(`has a malformed container entry #${i + 1}`);
    }
    if (!ARCHIVE_NAME.test(c.archive)) {
      throw bad(`names archive "${c.archive}" for container "${c.name}", not one of ${CONTAINERS_DIR}/<id>.tar`);
    }
    return {
      name: c.name, id: c.id, archive: c.archive, image: { id: image.id, name: image.name },
      command: c.command as string[], args: c.args as string[], workingDir: c.workingDir,
    };
  });
  const twice = firstRepeated(containers.map((c) => c.name));
  if (twice !== undefined) throw bad(`lists container "${twice}" twice`);
  const networks = Array.isArray(m.networks) ? m.networks : [];
  return {
    version: MANIFEST_VERSION,
    checkpointedAt: typeof m.checkpointedAt === 'string' ? m.checkpointedAt : '',
    pod: { namespace: pod.namespace as string, name: pod.name as string, uid: pod.uid as string },
    runtimeHandler: typeof m.runtimeHandler === 'string' ? m.runtimeHandler : '',
    config: m.config,
    networks: networks.flatMap((raw): CheckpointedAttachment[] => {
      const n = raw as Record<string, unknown>;
      if (typeof n?.network !== 'string' || typeof n.interface !== 'string' || !Array.isArray(n.cidrs)) return [];
      return [{
        network: n.network, interface: n.interface, cidrs: n.cidrs.filter((c): c is string => typeof c === 'string'),
        ...(typeof n.mac === 'string' ? { mac: n.mac } : {}), default: n.default === true,
      }];
    }),
    ...(Array.isArray(m.devices) ? { devices: m.devices } : {}),
    containers,
    ...(m.tcpEstablished === true ? { tcpEstablished: true } : {}),
  };
}

type NamedConfig = ContainerConfig__Output & { metadata: NonNullable<ContainerConfig__Output['metadata']> };

/**
 * Each requested config with the checkpointed container of its name, in the request's order: the two sets of
 * names must be equal (INVALID_ARGUMENT naming the names either side lacks).
 */
export function matchContainers(checkpointed: readonly CheckpointedContainer[], configs: readonly NamedConfig[], what: string):
  { config: NamedConfig; container: CheckpointedContainer }[] {
  const requested = new Set(configs.map((c) => c.metadata.name));
  // By name, the first of a name kept (as a search from the start would find it): linear in both lists.
  const byName = new Map<string, CheckpointedContainer>();
  for (const c of checkpointed) if (!byName.has(c.name)) byName.set(c.name, c);
  const missing = checkpointed.filter((c) => !requested.has(c.name)).map((c) => `"${c.name}"`);
  const unknown = configs.filter((c) => !byName.has(c.metadata.name)).map((c) => `"${c.metadata.name}"`);
  if (missing.length > 0 || unknown.length > 0) {
    const parts = [
      missing.length > 0 ? `no container_configs entry for ${missing.join(', ')}` : '',
      unknown.length > 0 ? `no container named ${unknown.join(', ')} in the checkpoint` : '',
    ].filter(Boolean);
    throw new InvalidArgument(`${what}: the container names do not match the checkpoint's (${parts.join('; ')}): `
      + `give exactly one config per checkpointed container (${checkpointed.map((c) => `"${c.name}"`).join(', ')})`);
  }
  return configs.map((config) => ({ config, container: byName.get(config.metadata.name)! }));
}

/**
 * FAILED_PRECONDITION when the request describes another process than the checkpointed one: the checkpoint's
 * memory is that process, whatever the request's command, args or working directory say.
 */
export function checkSameProcess(container: CheckpointedContainer, config: NamedConfig): void {
  const differs = [
    ['command', container.command, config.command], ['args', container.args, config.args],
  ].filter(([, a, b]) => JSON.stringify(a) !== JSON.stringify(b))
    .map(([k, a, b]) => `${k} ${JSON.stringify(b)} (checkpointed: ${JSON.stringify(a)})`);
  if (container.workingDir !== config.working_dir) {
    differs.push(`working_dir "${config.working_dir}" (checkpointed: "${container.workingDir}")`);
  }
  if (differs.length > 0) {
    throw new FailedPrecondition(`container "${container.name}": the request describes another process than the checkpointed one: `
      + `${differs.join('; ')}; restore it with the config it was checkpointed with`);
  }
}

/** What becomes of a secondary network's address in a restore. */
export interface AddressPlan {
  /** The annotations to create the sandbox with: the networks annotation asks again for addresses that can be kept. */
  annotations: Record<string, string>;
  /** Attachments whose address the restored pod must have (asked for again, or fixed by static IPAM). */
  kept: { network: string; interface: string; cidrs: string[] }[];
  /** Attachments whose network cannot ask for an address: they get a new one. */
  renewed: { network: string; interface: string }[];
}

/**
 * Which recorded secondary addresses a restored pod keeps: where the network (as `secondaries` describes this
 * node's definition of it) declares the `ips` capability, the recorded addresses go into the pod's networks
 * annotation; where its static IPAM fixes them, they are expected back. Matched by network and interface.
 */
export function planSecondaryAddresses(
  annotations: Record<string, string>, podNamespace: string, recorded: readonly CheckpointedAttachment[],
  secondaries: readonly SecondaryNetwork[],
): AddressPlan {
  const kept: AddressPlan['kept'] = [];
  const renewed: AddressPlan['renewed'] = [];
  const selections = assignInterfaces(parseNetworkSelections(annotations[NETWORKS_ANNOTATION] ?? '', podNamespace));
  let asked = false;
  const elements = selections.map(({ selection, ifName }) => {
    const key = `${selection.namespace}/${selection.name}`;
    const was = recorded.find((r) => !r.default && r.network === key && r.interface === ifName);
    const keeping = secondaries.find((s) => s.key === key && s.ifName === ifName)?.keeping ?? 'none';
    if (!was || was.cidrs.length === 0) return selection;
    if (keeping === 'none') {
      renewed.push({ network: key, interface: ifName });
      return selection;
    }
    kept.push({ network: key, interface: ifName, cidrs: was.cidrs });
    if (keeping === 'static-ipam') return selection;
    if (selection.ips && JSON.stringify([...selection.ips].sort()) !== JSON.stringify([...was.cidrs].sort())) {
      throw new InvalidArgument(`network ${key} on ${ifName}: the request asks for addresses ${selection.ips.join(', ')}, `
        + `the checkpointed pod had ${was.cidrs.join(', ')}: ask for the checkpointed ones or none`);
    }
    asked = true;
    return { ...selection, interface: ifName, ips: was.cidrs };
  });
  const out = asked ? { ...annotations, [NETWORKS_ANNOTATION]: JSON.stringify(elements.map(selectionElement)) } : annotations;
  return { annotations: out, kept, renewed };
}

/** A pod holding an address elsewhere on the node, as its sandbox record's network status says. */
export interface AddressHolder {
  id: string;
  pod: string;
  /** Whether its network is attached: a stopped pod keeps its status but holds no address. */
  networkAttached: boolean;
  networkStatus?: unknown[];
}

/** FAILED_PRECONDITION when another sandbox holds an address the restored pod must keep, on the same network. */
export function checkAddressesFree(kept: AddressPlan['kept'], holders: readonly AddressHolder[]): void {
  for (const k of kept) {
    const ips = k.cidrs.map((c) => c.slice(0, c.lastIndexOf('/')));
    for (const h of holders.filter((x) => x.networkAttached)) {
      const taken = (h.networkStatus ?? []).some((raw) => {
        const e = raw as StatusEntry;
        return e?.name === k.network && Array.isArray(e.ips) && e.ips.some((ip) => ips.includes(ip as string));
      });
      if (taken) {
        throw new FailedPrecondition(`network ${k.network}: address ${ips.join(', ')} of the checkpointed pod is taken by pod ${h.pod} `
          + `(sandbox ${h.id}): remove that pod, or restore where the address is free`);
      }
    }
  }
}

/** FAILED_PRECONDITION unless the restored pod's attachments have every address it had to keep. */
export function checkKeptAddresses(kept: AddressPlan['kept'], now: readonly CheckpointedAttachment[]): void {
  for (const k of kept) {
    const got = now.find((a) => a.network === k.network && a.interface === k.interface)?.cidrs ?? [];
    const ips = (l: string[]) => l.map((c) => c.slice(0, c.lastIndexOf('/') < 0 ? undefined : c.lastIndexOf('/'))).sort();
    if (JSON.stringify(ips(got)) !== JSON.stringify(ips(k.cidrs))) {
      throw new FailedPrecondition(`network ${k.network} on ${k.interface} gave the restored pod ${got.join(', ') || 'no address'}, `
        + `not the checkpointed ${k.cidrs.join(', ')}: its definition on this node fixes another address`);
    }
  }
}
