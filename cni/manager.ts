// The pod network as the pod domain uses it: set up, tear down and check a pod, the network's status, GC.
// Three parts: the network catalogue says which networks a pod joins, the plugin chain runs one
// attachment (with its cache entry, so teardown replays exactly what setup did), and every pod operation
// here is one walk over the pod's attachments (attachments.ts), as ocicni walks a pod's networks.
import { mkdir, readFile, rmdir, unlink } from 'node:fs/promises';
import path from 'node:path';
import { FailedPrecondition, InvalidArgument } from '../core/errors.js';
import { writeFileAtomic } from '../core/fs.js';
import { KeyedLock } from '../core/locks.js';
import type { Logger } from '../core/log.js';
import type { TimelineEntry } from '../core/timeline.js';
import { netnsExists, setDefaultRoutes } from '../netns/netns.js';
import { capabilityArgs, cniArgs, type PortMapping } from './args.js';
import {
  fallbackAttachments,
  forEachAttachment,
  isLoopback,
  plannedAttachments,
  throwAll,
  validAttachments,
  withFallbacks,
  type Attachment,
  type PodInvocation,
} from './attachments.js';
import { LOOPBACK_NETWORK } from './config.js';
import { assignDevices } from './devices.js';
import {
  assignDraDevices,
  deviceInfo,
  draAttachmentStatus,
  pluginDevice,
  type DraAssignment,
  type DraAttachmentStatus,
  type KnownCdiDevice,
  type PodDeviceStatusFile,
} from './dra.js';
import { NetworkCatalogue } from './network-catalogue.js';
import { POD_IFNAME } from './network-selection.js';
import { attachmentAddresses, networkStatusEntry, type NetworkStatusEntry } from './network-status.js';
import { addressKeeping, type AddressKeeping, type PodPlan } from './pod-plan.js';
import type { PodDeviceSource } from './pod-resources.js';
import { PluginChain } from './plugin-chain.js';
import { podIps, type CniResult } from './result.js';

const DEFAULT_NETWORKS_DIR = '/etc/minicri/networks.d';
/** The per-pod device status file, in the pod's own directory under the device status dir. */
export const DEVICE_STATUS_FILE = 'network-devices.json';

/** The node's CDI devices, as DRA-backed networks look them up. */
export interface CdiLookup {
  readonly dirs: readonly string[];
  lookup(name: string): Promise<KnownCdiDevice | undefined>;
}

export interface CniManagerOptions {
  confDir: string;
  binDirs: string[];
  /** Where attachment results are cached (libcni layout); default /var/lib/cni. */
  cacheDir?: string;
  /** Network to use by name; default: the first valid config file in sorted order. */
  defaultNetwork?: string;
  /** NetworkAttachmentDefinitions (YAML or JSON files) for secondary networks; default /etc/minicri/networks.d. */
  networksDir?: string;
  /** kubelet's pod-resources API, asked only for pods with device-backed networks. */
  podResources?: PodDeviceSource;
  /** The node's CDI spec files, where DRA-backed networks find what their devices are. */
  cdi?: CdiLookup;
  /** Where each pod's DRA device status goes (`<dir>/<sandbox id>/network-devices.json`); none written without it. */
  deviceStatusDir?: string;
  /** Longest a single plugin call may run before it is killed; default 60s. */
  pluginTimeoutMs?: number;
  log: Logger;
  /** Follow changes of the conf and networks dirs (default true); without it they are re-read on every call. */
  watch?: boolean;
}

export interface PodNetworkRequest {
  sandboxId: string;
  name: string;
  namespace: string;
  uid: string;
  netnsPath: string;
  portMappings: PortMapping[];
  annotations: Record<string, string>;
  cgroupParent?: string;
}

export interface PodNetworkStatus {
  /** Primary first (IPv4 before IPv6), then additional IPs: the default network's only. */
  ips: string[];
  /** Raw result per network (loopback, the default network, then each secondary one), for verbose status. */
  results: unknown[];
  /** Every attachment but loopback, in the format multus writes to the network-status annotation. */
  networkStatus: NetworkStatusEntry[];
  /** How long each plugin's ADD took ("cni-add" steps naming the plugin), for the pod's startup timeline. */
  steps?: TimelineEntry[];
  /** Each DRA-backed attachment's device status (also in the pod's device status file). */
  deviceStatus?: DraAttachmentStatus[];
}

/** A secondary network of a pod: its name in the network status ("namespace/name"), its interface, how it keeps an address. */
export interface SecondaryNetwork {
  key: string;
  ifName: string;
  keeping: AddressKeeping;
}

/** The device each secondary attachment of a plan gets (undefined: none), and where a DRA one came from. */
interface PlannedDevices {
  ids: (string | undefined)[];
  dra: ({ assignment: DraAssignment; cdiName: string } | undefined)[];
}

export const NETWORK_NOT_READY = 'NetworkPluginNotReady';

export class CniManager {
  private podCidr: string | undefined;
  private readonly locks = new KeyedLock();

  private constructor(
    private readonly catalogue: NetworkCatalogue,
    private readonly chain: PluginChain,
    private readonly podResources: PodDeviceSource | undefined,
    private readonly o: Pick<CniManagerOptions, 'cdi' | 'deviceStatusDir'>,
    private readonly log: Logger,
  ) {}

  static async create(o: CniManagerOptions): Promise<CniManager> {
    if (o.binDirs.length === 0) throw new InvalidArgument('CNI manager needs at least one plugin bin dir');
    const chain = new PluginChain(o.cacheDir ?? '/var/lib/cni', o.binDirs, o.pluginTimeoutMs ?? 60_000, o.log);
    await chain.cache.removeStaleTemps();
    const catalogue = await NetworkCatalogue.open({
      confDir: o.confDir,
      networksDir: o.networksDir ?? DEFAULT_NETWORKS_DIR,
      defaultNetwork: o.defaultNetwork,
      log: o.log,
      watch: o.watch !== false,
    });
    return new CniManager(catalogue, chain, o.podResources, o, o.log);
  }

  defaultNetworkName(): string | undefined {
    return this.catalogue.defaultNetwork?.name;
  }

  /** Pod CIDR(s) from kubelet's UpdateRuntimeConfig, offered to plugins as the ipRanges capability. */
  setPodCidr(cidr: string): void {
    this.podCidr = cidr.trim() || undefined;
  }

  /** Attaches lo and eth0, then each secondary network; on a failure, detaches what was attached and throws. */
  async setUpPod(r: PodNetworkRequest): Promise<PodNetworkStatus> {
    validateRequest(r, true);
    return this.locks.run(r.sandboxId, async () => {
      await this.catalogue.refresh();
      // Everything that can refuse the request (annotations, definitions, devices, a bad bandwidth
      // annotation) is done before any plugin runs, so a refusal has nothing to undo.
      const plan = this.catalogue.plan(r);
      const steps: TimelineEntry[] = [];
      const pod = { ...this.podInvocation(r, r.netnsPath), steps };
      const devices = await this.devicesFor(r, plan);
      const attachments = plannedAttachments(plan, pod, devices.ids);
      const planned = plan.secondaries.map((s) => s.ifName);
      const started = performance.now();
      const results = new Map<Attachment, CniResult>();
      const failures = await forEachAttachment(attachments, { direction: 'attach', planned, stopAtFailure: true }, async (a) => {
        results.set(a, await this.chain.add(a));
        const gateways = a.secondary?.selection.defaultRoute;
        if (gateways) await setDefaultRoutes(r.netnsPath, a.inv.ifName, gateways);
      });
      if (failures.length > 0) {
        // A failed ADD undid itself; the attachments that were made are undone here.
        const made = attachments.flatMap((a) => (results.has(a) ? [{ ...a, prev: results.get(a)! }] : []));
        await this.undoSetUp(r.sandboxId, made, planned);
        // eth0's failure is the one to report when lo's failed at the same time.
        throw (failures.find((f) => f.attachment.inv.ifName === POD_IFNAME) ?? failures[0]!).error;
      }
      const ms = Math.round(performance.now() - started);
      this.log.debug({ sandbox: r.sandboxId, network: plan.main.name, secondary: plan.secondaries.length, ms }, 'pod network set up');
      const status = podNetworkStatus(plan, attachments, results, devices);
      if (status.deviceStatus) {
        try {
          await this.writeDeviceStatus(r, status);
        } catch (err) {
          await this.undoSetUp(r.sandboxId, attachments.map((a) => ({ ...a, prev: results.get(a)! })), planned);
          throw err;
        }
      }
      return { ...status, steps };
    });
  }

  /** The pod's DRA device status file, as set-up wrote it; undefined when it has none or it cannot be read (logged). */
  async deviceStatus(sandboxId: string): Promise<PodDeviceStatusFile | undefined> {
    const file = this.deviceStatusFile(sandboxId);
    if (!file) return undefined;
    try {
      return JSON.parse(await readFile(file, 'utf8')) as PodDeviceStatusFile;
    } catch (err) {
      // Written whole by rename, so only someone else's hand can break it; the pod's status still answers.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
        this.log.warn({ file, err: (err as Error).message }, 'unreadable device status file');
      }
      return undefined;
    }
  }

  /** Detaches the pod from every network it was attached to, in reverse order; succeeds when there is nothing left to do. */
  async tearDownPod(r: PodNetworkRequest): Promise<void> {
    validateRequest(r, false);
    await this.locks.run(r.sandboxId, async () => {
      await this.catalogue.refresh();
      // A vanished namespace is fine: plugins still release host-side state (IPs, iptables) on DEL.
      const netns = r.netnsPath && (await netnsExists(r.netnsPath)) ? r.netnsPath : '';
      const pod = this.podInvocation(r, netns);
      const cached = await this.chain.cached(r.sandboxId, netns, pod);
      // The networks the pod asked for, as far as they still resolve: the order to undo them in, and
      // what to DEL through for an interface without a cache entry (cache lost, or setup died midway).
      const plan = this.planIfResolvable(r);
      const attachments = withFallbacks(cached, fallbackAttachments(plan, this.catalogue.defaultNetwork, pod));
      const planned = plan?.secondaries.map((s) => s.ifName);
      const failures = await forEachAttachment(attachments, { direction: 'detach', planned, stopAtFailure: false }, (a) =>
        // Loopback needs no DEL: its only state is the interface, which ends with the namespace (ocicni does not DEL it either).
        isLoopback(a) ? this.chain.forget(a) : this.chain.del(a),
      );
      throwAll(failures.map((f) => f.error), `tearing down network of pod ${r.namespace}/${r.name}`);
      // Every device is back on the host: its status no longer holds.
      const file = this.deviceStatusFile(r.sandboxId);
      if (file && (await unlink(file).then(() => true, () => false))) {
        // The pod's directory goes with it when nothing else is in it (RemovePodSandbox removes it otherwise).
        await rmdir(path.dirname(file)).catch(() => undefined);
      }
    });
  }

  /** CHECK of every attachment of the pod (for configs >= 0.4.0 that do not disable it). */
  async checkPod(r: PodNetworkRequest): Promise<void> {
    validateRequest(r, true);
    await this.locks.run(r.sandboxId, async () => {
      if (!(await netnsExists(r.netnsPath))) {
        throw new FailedPrecondition(`network namespace ${r.netnsPath} of pod ${r.namespace}/${r.name} is gone: recreate the sandbox`);
      }
      const attachments = await this.chain.cached(r.sandboxId, r.netnsPath, this.podInvocation(r, r.netnsPath));
      if (!attachments.some((a) => a.inv.ifName === POD_IFNAME)) {
        throw new FailedPrecondition(`pod ${r.namespace}/${r.name} has no recorded network attachment: recreate the sandbox`);
      }
      const [failure] = await forEachAttachment(attachments, { direction: 'attach', stopAtFailure: true }, (a) => this.chain.check(a));
      if (failure) throw failure.error;
    });
  }

  /** Ready when a network is configured, its plugins are installed and (CNI >= 1.1.0) each answers STATUS. */
  async status(): Promise<{ ready: boolean; reason: string; message: string }> {
    await this.catalogue.refresh();
    const net = this.catalogue.defaultNetwork;
    const notReady = (message: string) => ({ ready: false, reason: NETWORK_NOT_READY, message });
    if (!net) return notReady(this.catalogue.notReadyMessage());
    const missing = this.chain.missingPlugin([LOOPBACK_NETWORK, net]);
    if (missing) {
      return notReady(`CNI plugin "${missing.type}" of network "${missing.list.name}" not found in ${this.chain.binDirs.join(':')}`);
    }
    try {
      await this.chain.status(net);
    } catch (err) {
      return notReady((err as Error).message);
    }
    return { ready: true, reason: '', message: '' };
  }

  /**
   * Removes attachments of sandboxes that no longer exist: DEL of each cached attachment not in the valid set,
   * then (CNI >= 1.1.0) GC to every plugin of the default and each defined network with its valid attachments.
   */
  async gc(validSandboxIds: string[]): Promise<void> {
    const valid = new Set(validSandboxIds);
    const errors: Error[] = [];
    const stale = [...new Set((await this.chain.cache.list()).map((e) => e.containerId))].filter((id) => !valid.has(id));
    for (const id of stale) {
      await this.locks.run(id, async () => {
        const attachments = await this.chain.cached(id, '', { args: [], caps: {} });
        const failures = await forEachAttachment(attachments, { direction: 'detach', stopAtFailure: false }, async (a) => {
          // DEL in the namespace ADD ran in while it still exists, else without one.
          const netns = a.cachedNetns && (await netnsExists(a.cachedNetns)) ? a.cachedNetns : a.inv.netns;
          await this.chain.del({ ...a, inv: { ...a.inv, netns } });
        });
        errors.push(...failures.map((f) => f.error));
      });
    }
    await this.catalogue.refresh();
    const remaining = await this.chain.cache.list();
    const targets = validAttachments(this.catalogue.defaultNetwork, this.catalogue.definedNetworks(), remaining, validSandboxIds);
    for (const { list, attachments } of targets) errors.push(...(await this.chain.gc(list, attachments)));
    if (stale.length > 0) this.log.info({ removed: stale.length }, 'garbage-collected pod network attachments');
    throwAll(errors, 'CNI garbage collection');
  }

  /**
   * Refuses, before anything is made for the pod, a request for networks that cannot be resolved (annotations,
   * definitions); setUpPod checks again with the devices, on the configuration of its time.
   */
  checkPodNetworks(pod: Pick<PodNetworkRequest, 'name' | 'namespace' | 'annotations'>): void {
    this.catalogue.plan(pod);
  }

  /** The secondary networks a pod asks for, each with its interface and how it can keep an address. */
  secondaryNetworks(pod: Pick<PodNetworkRequest, 'name' | 'namespace' | 'annotations'>): SecondaryNetwork[] {
    return this.catalogue.plan(pod).secondaries.map((s) => ({ key: s.key, ifName: s.ifName, keeping: addressKeeping(s.list) }));
  }

  close(): void {
    this.catalogue.close();
  }

  /** DEL of what a failed set-up made, last made first; one that fails is logged and the rest still go. */
  private async undoSetUp(sandboxId: string, made: Attachment[], planned: string[]): Promise<void> {
    await forEachAttachment(made, { direction: 'detach', planned, stopAtFailure: false }, (a) =>
      this.chain.del(a).catch((e: unknown) => {
        const fields = { sandbox: sandboxId, network: a.list.name, ifName: a.inv.ifName, err: (e as Error).message };
        this.log.warn(fields, 'undoing part of a failed pod network setup failed');
      }),
    );
  }

  /** What each of the pod's attachments gets unless its cache entry or its selection says otherwise. */
  private podInvocation(r: PodNetworkRequest, netns: string): PodInvocation {
    return { containerId: r.sandboxId, netns, args: cniArgs(r), caps: capabilityArgs({ ...r, podCidr: this.podCidr }) };
  }

  private planIfResolvable(r: PodNetworkRequest): PodPlan | undefined {
    try {
      return this.catalogue.plan(r);
    } catch {
      return undefined; // the definitions changed since: the cache entries are all there is
    }
  }

  /**
   * A device for each secondary attachment whose definition takes one (in the plan's order): of its
   * device-plugin resource, or of its DRA driver, resolved through the device's CDI spec.
   */
  private async devicesFor(r: PodNetworkRequest, plan: PodPlan): Promise<PlannedDevices> {
    if (!plan.secondaries.some((s) => s.resourceName || s.dra)) return { ids: [], dra: [] };
    // Only a pod with a device-backed network asks kubelet.
    if (!this.podResources) {
      throw new FailedPrecondition(`pod ${r.namespace}/${r.name} asks for a device-backed network but no pod-resources API is configured`);
    }
    const allocations = await this.podResources.podAllocations(r.namespace, r.name);
    const needs = plan.secondaries.map((s) => ({
      name: s.key, ...(s.resourceName ? { resourceName: s.resourceName } : {}), ...(s.dra ? { dra: s.dra } : {}),
    }));
    const ids = assignDevices(needs, allocations.devices, allocations.claims.length > 0);
    const assignments = assignDraDevices(needs, allocations.claims, `${r.namespace}/${r.name}`);
    const dra: PlannedDevices['dra'] = [];
    for (const [i, assignment] of assignments.entries()) {
      if (!assignment) continue;
      const cdi = this.o.cdi;
      if (!cdi) {
        throw new FailedPrecondition(`network ${needs[i]!.name} takes a DRA device but minicri has no CDI spec directories configured`);
      }
      const known = new Map<string, KnownCdiDevice | undefined>();
      for (const name of assignment.device.cdiDevices) known.set(name, await cdi.lookup(name));
      const device = pluginDevice(assignment, (name) => known.get(name), cdi.dirs);
      ids[i] = device.deviceId;
      dra[i] = { assignment, cdiName: device.cdiName };
    }
    return { ids, dra };
  }

  private deviceStatusFile(sandboxId: string): string | undefined {
    return this.o.deviceStatusDir && path.join(this.o.deviceStatusDir, sandboxId, DEVICE_STATUS_FILE);
  }

  /** The pod's device status file, written whole (temp file and rename) so a reader never sees half of it. */
  private async writeDeviceStatus(r: PodNetworkRequest, status: PodNetworkStatus): Promise<void> {
    const file = this.deviceStatusFile(r.sandboxId);
    if (!file) return;
    await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    const content: PodDeviceStatusFile = {
      pod: { namespace: r.namespace, name: r.name, uid: r.uid, sandboxId: r.sandboxId },
      devices: status.deviceStatus ?? [],
      networkStatus: status.networkStatus,
    };
    await writeFileAtomic(file, `${JSON.stringify(content, null, 2)}\n`, 0o644);
  }
}

function validateRequest(r: PodNetworkRequest, needNetns: boolean): void {
  // The container ID ends up in file names (cache, host-local) and iptables comments.
  if (!/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/.test(r.sandboxId ?? '')) {
    throw new InvalidArgument(`invalid sandbox id ${JSON.stringify(r.sandboxId)} for pod network: letters, digits, '_', '.', '-' only`);
  }
  if (needNetns && !r.netnsPath) throw new InvalidArgument(`pod ${r.namespace}/${r.name} has no network namespace path`);
}

/** The pod's IPs (eth0's), every result in attach order, the network status multus would write, and the DRA devices' status. */
function podNetworkStatus(
  plan: PodPlan,
  attachments: Attachment[],
  results: Map<Attachment, CniResult>,
  devices: PlannedDevices,
): PodNetworkStatus {
  const resultOf = (a: Attachment) => results.get(a)!;
  const main = resultOf(attachments.find((a) => a.inv.ifName === POD_IFNAME)!);
  const secondaries = attachments.flatMap((a) => (a.secondary ? [{ a, s: a.secondary }] : []));
  const deviceStatus: DraAttachmentStatus[] = [];
  const secondaryEntries = secondaries.map(({ a, s }, i) => {
    const entry = networkStatusEntry(s.key, a.inv.ifName, resultOf(a), { gateway: s.selection.defaultRoute });
    const dra = devices.dra[i];
    if (!dra) return entry;
    const info = deviceInfo(devices.ids[i]!);
    const withInfo = info && !entry['device-info'] ? { ...entry, 'device-info': info } : entry;
    const addresses = attachmentAddresses(resultOf(a), a.inv.ifName);
    const device = { deviceId: devices.ids[i]!, cdiName: dra.cdiName };
    deviceStatus.push(draAttachmentStatus(s.key, a.inv.ifName, dra.assignment, device, addresses, withInfo));
    return withInfo;
  });
  return {
    ips: podIps(main),
    results: attachments.map((a) => resultOf(a).raw),
    networkStatus: [networkStatusEntry(plan.mainName, POD_IFNAME, main, { isDefault: true }), ...secondaryEntries],
    ...(deviceStatus.length > 0 ? { deviceStatus } : {}),
  };
}
