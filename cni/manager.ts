// The pod network as the pod domain uses it: set up, tear down and check a pod, the network's status, GC.
// Three parts: the network catalogue says which networks a pod joins, the plugin chain runs one
// attachment (with its cache entry, so teardown replays exactly what setup did), and every pod operation
// here is one walk over the pod's attachments (attachments.ts), as ocicni walks a pod's networks.
import { FailedPrecondition, InvalidArgument } from '../core/errors.js';
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
import { NetworkCatalogue } from './network-catalogue.js';
import { POD_IFNAME } from './network-selection.js';
import { networkStatusEntry, type NetworkStatusEntry } from './network-status.js';
import type { PodPlan } from './pod-plan.js';
import type { PodDeviceSource } from './pod-resources.js';
import { PluginChain } from './plugin-chain.js';
import { podIps, type CniResult } from './result.js';

const DEFAULT_NETWORKS_DIR = '/etc/minicri/networks.d';

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
}

export const NETWORK_NOT_READY = 'NetworkPluginNotReady';

export class CniManager {
  private podCidr: string | undefined;
  private readonly locks = new KeyedLock();

  private constructor(
    private readonly catalogue: NetworkCatalogue,
    private readonly chain: PluginChain,
    private readonly podResources: PodDeviceSource | undefined,
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
    return new CniManager(catalogue, chain, o.podResources, o.log);
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
      const attachments = plannedAttachments(plan, pod, await this.deviceIds(r, plan));
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
      return { ...podNetworkStatus(plan, attachments, results), steps };
    });
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

  /** A device of its resource for each secondary attachment whose definition names one (in the plan's order). */
  private async deviceIds(r: PodNetworkRequest, plan: PodPlan): Promise<(string | undefined)[]> {
    if (!plan.secondaries.some((s) => s.resourceName)) return [];
    // Only a pod with a device-backed network asks kubelet.
    if (!this.podResources) {
      throw new FailedPrecondition(`pod ${r.namespace}/${r.name} asks for a device-backed network but no pod-resources API is configured`);
    }
    const devices = await this.podResources.podDevices(r.namespace, r.name);
    const needs = plan.secondaries.map((s) => ({ name: s.key, ...(s.resourceName ? { resourceName: s.resourceName } : {}) }));
    return assignDevices(needs, devices);
  }
}

function validateRequest(r: PodNetworkRequest, needNetns: boolean): void {
  // The container ID ends up in file names (cache, host-local) and iptables comments.
  if (!/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/.test(r.sandboxId ?? '')) {
    throw new InvalidArgument(`invalid sandbox id ${JSON.stringify(r.sandboxId)} for pod network: letters, digits, '_', '.', '-' only`);
  }
  if (needNetns && !r.netnsPath) throw new InvalidArgument(`pod ${r.namespace}/${r.name} has no network namespace path`);
}

/** The pod's IPs (eth0's), every result in attach order, and the network status multus would write. */
function podNetworkStatus(plan: PodPlan, attachments: Attachment[], results: Map<Attachment, CniResult>): PodNetworkStatus {
  const resultOf = (a: Attachment) => results.get(a)!;
  const main = resultOf(attachments.find((a) => a.inv.ifName === POD_IFNAME)!);
  const secondaries = attachments.flatMap((a) => (a.secondary ? [{ a, s: a.secondary }] : []));
  return {
    ips: podIps(main),
    results: attachments.map((a) => resultOf(a).raw),
    networkStatus: [
      networkStatusEntry(plan.mainName, POD_IFNAME, main, { isDefault: true }),
      ...secondaries.map(({ a, s }) => networkStatusEntry(s.key, a.inv.ifName, resultOf(a), { gateway: s.selection.defaultRoute })),
    ],
  };
}
