// The pod network manager: which networks pods join (the default one discovered from the conf dir,
// secondary ones from NetworkAttachmentDefinitions in the networks dir, both kept current by watchers),
// and attaching/detaching/checking a pod through each network's plugin chain with a result cache per
// attachment so teardown always replays exactly what setup did.
import type { Logger } from '../core/log.js';
import type { TimelineEntry } from '../core/timeline.js';
import { FailedPrecondition, Internal, InvalidArgument } from '../core/errors.js';
import { netnsExists, setDefaultRoutes } from '../netns/netns.js';
import { attachmentCapabilityArgs, capabilityArgs, cniArgs, cniArgsString, pluginStdin, type PortMapping } from './args.js';
import { loadDefinitions, type AttachmentDefinition } from './attachment-definitions.js';
import { ResultCache, CACHE_KIND, type CachedAttachment } from './cache.js';
import { loadNetworks, LOOPBACK_NETWORK, parseNetworkList, selectDefault, type NetworkList } from './config.js';
import { assignDevices, withDeviceId } from './devices.js';
import { DirWatcher } from './dir-watch.js';
import { faultPoint } from '../core/faults.js';
import { execPlugin, findPlugin, type CniCommand, type ExecOptions } from './exec.js';
import { KeyedLock } from '../core/locks.js';
import { LOOPBACK_IFNAME, POD_IFNAME } from './network-selection.js';
import { networkStatusEntry, type NetworkStatusEntry } from './network-status.js';
import { planPodNetworks, type PodPlan, type SecondaryPlan } from './pod-plan.js';
import type { PodDeviceSource } from './pod-resources.js';
import { convertResult, parseResult, podIps, type CniResult } from './result.js';
import { versionAtLeast } from './version.js';

export const DEFAULT_NETWORKS_DIR = '/etc/minicri/networks.d';

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
const WATCH_DEBOUNCE_MS = 100;

/** What one plugin-chain run needs besides the network list. */
interface Invocation {
  containerId: string;
  netns: string;
  ifName: string;
  args: [string, string][];
  caps: Record<string, unknown>;
  /** Where each plugin's ADD time goes. */
  steps?: TimelineEntry[];
}

/** A secondary attachment ready to run: its network (with any device written in) and invocation. */
interface SecondaryJob {
  plan: SecondaryPlan;
  list: NetworkList;
  inv: Invocation;
}

interface DelJob {
  list: NetworkList;
  inv: Invocation;
  prev?: CniResult;
  cachedNetns?: string;
}

export class CniManager {
  private defaultNet: NetworkList | undefined;
  private confLists: NetworkList[] = [];
  private definitions = new Map<string, AttachmentDefinition>();
  private podCidr: string | undefined;
  private watchers: DirWatcher[] = [];
  private debounceTimer: NodeJS.Timeout | undefined;
  private syncChain: Promise<void> = Promise.resolve();
  private closed = false;
  private readonly locks = new KeyedLock();
  private readonly cache: ResultCache;
  private readonly exec: ExecOptions;
  private readonly log: Logger;
  private readonly networksDir: string;

  private constructor(private readonly o: CniManagerOptions) {
    this.log = o.log;
    this.cache = new ResultCache(o.cacheDir ?? '/var/lib/cni');
    this.exec = { binDirs: o.binDirs, timeoutMs: o.pluginTimeoutMs ?? 60_000, log: o.log };
    this.networksDir = o.networksDir ?? DEFAULT_NETWORKS_DIR;
  }

  static async create(o: CniManagerOptions): Promise<CniManager> {
    if (o.binDirs.length === 0) throw new InvalidArgument('CNI manager needs at least one plugin bin dir');
    const m = new CniManager(o);
    await m.cache.removeStaleTemps();
    await m.sync();
    if (o.watch !== false) m.startWatch();
    return m;
  }

  defaultNetworkName(): string | undefined {
    return this.defaultNet?.name;
  }

  /** Pod CIDR(s) from kubelet's UpdateRuntimeConfig, offered to plugins as the ipRanges capability. */
  setPodCidr(cidr: string): void {
    this.podCidr = cidr.trim() || undefined;
  }

  async setUpPod(r: PodNetworkRequest): Promise<PodNetworkStatus> {
    validateRequest(r, true);
    return this.locks.run(r.sandboxId, async () => {
      await this.syncIfUnwatched();
      // Everything that can refuse the request (annotations, definitions, devices, a bad bandwidth
      // annotation) is done before any plugin runs, so a refusal has nothing to undo.
      const plan = this.plan(r);
      const args = cniArgs(r);
      const caps = capabilityArgs({ ...r, podCidr: this.podCidr });
      const steps: TimelineEntry[] = [];
      const secondaries = await this.secondaryJobs(r, plan, args, caps, steps);
      const net = plan.main;
      const inv = (ifName: string): Invocation => ({ containerId: r.sandboxId, netns: r.netnsPath, ifName, args, caps, steps });
      const started = performance.now();
      // lo and eth0 are separate interfaces set up by separate plugins: they can be attached at once.
      const [loSettled, mainSettled] = await Promise.allSettled([this.attach(LOOPBACK_NETWORK, inv(LOOPBACK_IFNAME)), this.attach(net, inv(POD_IFNAME))]);
      const done: { list: NetworkList; inv: Invocation; result: CniResult }[] = [];
      if (loSettled.status === 'fulfilled') done.push({ list: LOOPBACK_NETWORK, inv: inv(LOOPBACK_IFNAME), result: loSettled.value });
      if (mainSettled.status === 'fulfilled') done.push({ list: net, inv: inv(POD_IFNAME), result: mainSettled.value });
      try {
        if (mainSettled.status === 'rejected') throw mainSettled.reason;
        if (loSettled.status === 'rejected') throw loSettled.reason;
        // Secondary networks in the order the pod asked for them, each on its own interface.
        for (const job of secondaries) {
          const result = await this.attach(job.list, job.inv);
          done.push({ list: job.list, inv: job.inv, result });
          if (job.plan.selection.defaultRoute) await setDefaultRoutes(r.netnsPath, job.inv.ifName, job.plan.selection.defaultRoute);
        }
      } catch (err) {
        // attach() already undid itself; undo the ones that succeeded, last first.
        for (const d of done.reverse()) {
          await this.detach(d.list, d.inv, d.result).catch((e: unknown) =>
            this.log.warn({ sandbox: r.sandboxId, network: d.list.name, ifName: d.inv.ifName, err: (e as Error).message }, 'undoing part of a failed pod network setup failed'),
          );
        }
        throw err;
      }
      const [, main, ...others] = done.map((d) => d.result);
      this.log.debug({ sandbox: r.sandboxId, network: net.name, secondary: secondaries.length, ms: Math.round(performance.now() - started) }, 'pod network set up');
      return {
        ips: podIps(main!),
        results: done.map((d) => d.result.raw),
        networkStatus: [
          networkStatusEntry(plan.mainName, POD_IFNAME, main!, { isDefault: true }),
          ...secondaries.map((job, i) => networkStatusEntry(job.plan.key, job.inv.ifName, others[i]!, { gateway: job.plan.selection.defaultRoute })),
        ],
        steps,
      };
    });
  }

  /** Detaches the pod from every network it was attached to, in reverse order; succeeds when there is nothing left to do. */
  async tearDownPod(r: PodNetworkRequest): Promise<void> {
    validateRequest(r, false);
    await this.locks.run(r.sandboxId, async () => {
      await this.syncIfUnwatched();
      // A vanished namespace is fine: plugins still release host-side state (IPs, iptables) on DEL.
      const netns = r.netnsPath && (await netnsExists(r.netnsPath)) ? r.netnsPath : '';
      const args = cniArgs(r);
      const caps = capabilityArgs({ ...r, podCidr: this.podCidr });
      const jobs = await this.cachedJobs(r.sandboxId, netns, { args, caps });
      // The networks the pod asked for, as far as they still resolve: the order to undo them in, and
      // what to DEL through for an interface without a cache entry (cache lost, or setup died midway).
      let plan: PodPlan | undefined;
      try {
        plan = this.plan(r);
      } catch {
        plan = undefined; // the definitions changed since: the cache entries are all there is
      }
      const fallback = (list: NetworkList, ifName: string, extra: { args?: [string, string][]; caps?: Record<string, unknown> } = {}) => {
        if (!jobs.some((j) => j.inv.ifName === ifName)) jobs.push({ list, inv: { containerId: r.sandboxId, netns, ifName, args: extra.args ?? args, caps: extra.caps ?? caps } });
      };
      for (const s of plan?.secondaries ?? []) {
        // A device-backed attachment cannot be DELeted without knowing its device: only the cache knows it.
        if (!s.resourceName) fallback(s.list, s.ifName, { args: attachmentArgs(args, s), caps: attachmentCapabilityArgs(caps, s.selection) });
      }
      const main = plan?.main ?? this.defaultNet;
      if (main) fallback(main, POD_IFNAME);
      fallback(LOOPBACK_NETWORK, LOOPBACK_IFNAME);
      const order = (plan?.secondaries ?? []).map((s) => s.ifName);
      const errors: Error[] = [];
      for (const job of delOrder(jobs, order)) {
        try {
          // Loopback needs no DEL: its only state is the interface, which ends with the namespace (ocicni does not DEL it either).
          if (isLoopback(job.list, job.inv)) await this.cache.remove(job.list.name, job.inv.containerId, job.inv.ifName);
          else await this.detach(job.list, job.inv, job.prev);
        } catch (err) {
          errors.push(err as Error);
        }
      }
      throwAll(errors, `tearing down network of pod ${r.namespace}/${r.name}`);
    });
  }

  /** CHECK of every attachment of the pod (for configs >= 0.4.0 that do not disable it). */
  async checkPod(r: PodNetworkRequest): Promise<void> {
    validateRequest(r, true);
    await this.locks.run(r.sandboxId, async () => {
      if (!(await netnsExists(r.netnsPath))) {
        throw new FailedPrecondition(`network namespace ${r.netnsPath} of pod ${r.namespace}/${r.name} is gone: recreate the sandbox`);
      }
      const jobs = await this.cachedJobs(r.sandboxId, r.netnsPath, { args: cniArgs(r), caps: capabilityArgs({ ...r, podCidr: this.podCidr }) });
      if (!jobs.some((j) => j.inv.ifName === POD_IFNAME)) {
        throw new FailedPrecondition(`pod ${r.namespace}/${r.name} has no recorded network attachment: recreate the sandbox`);
      }
      for (const { list, inv, prev } of jobs) {
        if (!versionAtLeast(list.cniVersion, '0.4.0') || list.disableCheck) continue;
        for (const plugin of list.plugins) {
          const stdin = pluginStdin(list, plugin, { prevResult: prev && convertResult(prev, list.cniVersion), capabilityArgs: inv.caps });
          await execPlugin(this.call('CHECK', list, plugin.type, inv, stdin), this.exec);
        }
      }
    });
  }

  /** Ready when a network is configured, its plugins are installed and (CNI >= 1.1.0) each answers STATUS. */
  async status(): Promise<{ ready: boolean; reason: string; message: string }> {
    await this.syncIfUnwatched();
    const net = this.defaultNet;
    if (!net) return { ready: false, reason: NETWORK_NOT_READY, message: this.notReadyMessage() };
    const plugins = [LOOPBACK_NETWORK, net].flatMap((list) => list.plugins.map((plugin) => ({ list, plugin })));
    const missing = plugins.find(({ plugin }) => !findPlugin(plugin.type, this.o.binDirs));
    if (missing) {
      return {
        ready: false,
        reason: NETWORK_NOT_READY,
        message: `CNI plugin "${missing.plugin.type}" of network "${missing.list.name}" not found in ${this.o.binDirs.join(':')}`,
      };
    }
    if (versionAtLeast(net.cniVersion, '1.1.0')) {
      try {
        for (const plugin of net.plugins) {
          await execPlugin({ command: 'STATUS', pluginType: plugin.type, network: net.name, stdin: pluginStdin(net, plugin) }, this.exec);
        }
      } catch (err) {
        return { ready: false, reason: NETWORK_NOT_READY, message: (err as Error).message };
      }
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
    const stale = [...new Set((await this.cache.list()).map((e) => e.containerId))].filter((id) => !valid.has(id));
    for (const id of stale) {
      await this.locks.run(id, async () => {
        for (const job of delOrder(await this.cachedJobs(id, ''), [])) {
          if (job.cachedNetns && (await netnsExists(job.cachedNetns))) job.inv.netns = job.cachedNetns;
          try {
            await this.detach(job.list, job.inv, job.prev);
          } catch (err) {
            errors.push(err as Error);
          }
        }
      });
    }
    await this.syncIfUnwatched();
    const net = this.defaultNet;
    // The default network's attachments are every valid sandbox's eth0; a secondary network's are in the cache.
    const remaining = await this.cache.list();
    const targets = new Map<string, { list: NetworkList; attachments: { containerID: string; ifname: string }[] }>();
    if (net) targets.set(net.name, { list: net, attachments: validSandboxIds.map((containerID) => ({ containerID, ifname: POD_IFNAME })) });
    for (const def of this.definitions.values()) {
      if (!def.list || targets.has(def.list.name)) continue;
      const attachments = remaining.filter((e) => e.networkName === def.list!.name && valid.has(e.containerId)).map((e) => ({ containerID: e.containerId, ifname: e.ifName }));
      targets.set(def.list.name, { list: def.list, attachments });
    }
    for (const { list, attachments } of targets.values()) {
      if (!versionAtLeast(list.cniVersion, '1.1.0') || list.disableGC) continue;
      for (const plugin of list.plugins) {
        const stdin = pluginStdin(list, plugin, { extra: { 'cni.dev/valid-attachments': attachments } });
        try {
          await execPlugin({ command: 'GC', pluginType: plugin.type, network: list.name, stdin }, this.exec);
        } catch (err) {
          errors.push(err as Error);
        }
      }
    }
    if (stale.length > 0) this.log.info({ removed: stale.length }, 'garbage-collected pod network attachments');
    throwAll(errors, 'CNI garbage collection');
  }

  /**
   * Refuses, before anything is made for the pod, a request for networks that cannot be resolved (annotations,
   * definitions); setUpPod checks again with the devices, on the configuration of its time.
   */
  checkPodNetworks(pod: Pick<PodNetworkRequest, 'name' | 'namespace' | 'annotations'>): void {
    this.plan(pod);
  }

  /** The networks the pod asked for, resolved; throws InvalidArgument naming what is wrong. */
  private plan(r: Pick<PodNetworkRequest, 'name' | 'namespace' | 'annotations'>): PodPlan {
    const net = this.defaultNet;
    if (!net) throw new FailedPrecondition(`cannot set up network for pod ${r.namespace}/${r.name}: ${this.notReadyMessage()}`);
    return planPodNetworks(r.annotations, r.namespace, {
      defaultNet: net, definitions: this.definitions, confLists: this.confLists, networksDir: this.networksDir, confDir: this.o.confDir,
    });
  }

  /** Each secondary attachment's invocation, with a device of its resource where its definition names one. */
  private async secondaryJobs(r: PodNetworkRequest, plan: PodPlan, args: [string, string][], caps: Record<string, unknown>, steps: TimelineEntry[]): Promise<SecondaryJob[]> {
    let deviceIds: (string | undefined)[] = [];
    if (plan.secondaries.some((s) => s.resourceName)) {
      // Only a pod with a device-backed network asks kubelet.
      if (!this.o.podResources) throw new FailedPrecondition(`pod ${r.namespace}/${r.name} asks for a device-backed network but no pod-resources API is configured`);
      const devices = await this.o.podResources.podDevices(r.namespace, r.name);
      deviceIds = assignDevices(plan.secondaries.map((s) => ({ name: s.key, ...(s.resourceName ? { resourceName: s.resourceName } : {}) })), devices);
    }
    return plan.secondaries.map((s, i) => {
      const deviceId = deviceIds[i];
      return {
        plan: s,
        list: deviceId ? withDeviceId(s.list, deviceId) : s.list,
        inv: { containerId: r.sandboxId, netns: r.netnsPath, ifName: s.ifName, args: attachmentArgs(args, s), caps: attachmentCapabilityArgs(caps, s.selection, deviceId), steps },
      };
    });
  }

  close(): void {
    this.closed = true;
    for (const w of this.watchers) w.close();
    this.watchers = [];
    clearTimeout(this.debounceTimer);
  }

  // ---- plugin chains ----

  /** ADD through the list; on a failure, DEL what ran (including the failed plugin) so nothing leaks. */
  private async attach(list: NetworkList, inv: Invocation): Promise<CniResult> {
    let prev: CniResult | undefined;
    for (let i = 0; i < list.plugins.length; i++) {
      const plugin = list.plugins[i]!;
      try {
        const stdin = pluginStdin(list, plugin, { prevResult: prev && convertResult(prev, list.cniVersion), capabilityArgs: inv.caps });
        const started = performance.now();
        const out = await execPlugin(this.call('ADD', list, plugin.type, inv, stdin), this.exec);
        inv.steps?.push({ step: 'cni-add', plugin: plugin.type, network: list.name, ms: performance.now() - started });
        if (out === undefined) throw new Internal(`CNI plugin "${plugin.type}" (network "${list.name}") ADD returned no result`);
        prev = parseResult(out, `plugin "${plugin.type}" of network "${list.name}"`);
        faultPoint(`cni-add:${plugin.type}`);
      } catch (err) {
        await this.undo(list, inv, prev, i);
        throw err;
      }
    }
    const result = prev!;
    const entry: CachedAttachment = {
      kind: CACHE_KIND,
      containerId: inv.containerId,
      config: list.bytes.toString('base64'),
      ifName: inv.ifName,
      networkName: list.name,
      netns: inv.netns,
      cniArgs: inv.args,
      capabilityArgs: inv.caps,
      result: convertResult(result, list.cniVersion),
    };
    try {
      await this.cache.write(entry);
    } catch (err) {
      await this.undo(list, inv, result, list.plugins.length - 1);
      throw new Internal(`cannot cache CNI result of network "${list.name}" in ${this.cache.dir}: ${(err as Error).message}`, { cause: err });
    }
    return result;
  }

  private async undo(list: NetworkList, inv: Invocation, prev: CniResult | undefined, lastIndex: number): Promise<void> {
    try {
      await this.delPlugins(list, inv, prev, lastIndex);
    } catch (err) {
      this.log.warn({ sandbox: inv.containerId, network: list.name, err: (err as Error).message }, 'undoing a failed CNI ADD failed');
    }
  }

  /** DEL through the whole list in reverse, then forget the cache entry. */
  private async detach(list: NetworkList, inv: Invocation, prev: CniResult | undefined): Promise<void> {
    await this.delPlugins(list, inv, prev, list.plugins.length - 1);
    await this.cache.remove(list.name, inv.containerId, inv.ifName);
  }

  private async delPlugins(list: NetworkList, inv: Invocation, prev: CniResult | undefined, lastIndex: number): Promise<void> {
    // prevResult on DEL exists since CNI 0.4.0.
    const prevResult = prev && versionAtLeast(list.cniVersion, '0.4.0') ? convertResult(prev, list.cniVersion) : undefined;
    // Every plugin gets its DEL even when a later one failed: one broken plugin must not keep the
    // IPAM plugin from releasing the address. DEL is idempotent, so a retry may repeat them all.
    const errors: Error[] = [];
    for (let i = lastIndex; i >= 0; i--) {
      const plugin = list.plugins[i]!;
      const stdin = pluginStdin(list, plugin, { prevResult, capabilityArgs: inv.caps });
      try {
        await execPlugin(this.call('DEL', list, plugin.type, inv, stdin), this.exec);
      } catch (err) {
        errors.push(err as Error);
      }
      faultPoint(`cni-del:${plugin.type}`);
    }
    throwAll(errors, `deleting network "${list.name}" of ${inv.containerId}`);
  }

  private call(command: CniCommand, list: NetworkList, pluginType: string, inv: Invocation, stdin: Buffer) {
    return {
      command,
      pluginType,
      network: list.name,
      containerId: inv.containerId,
      netns: inv.netns,
      ifName: inv.ifName,
      args: cniArgsString(inv.args),
      stdin,
    };
  }

  /** DEL jobs for the pod's cached attachments, each with the config, args and result its ADD used. */
  private async cachedJobs(sandboxId: string, netns: string, fallback: { args: [string, string][]; caps: Record<string, unknown> } = { args: [], caps: {} }): Promise<DelJob[]> {
    const jobs: DelJob[] = [];
    for (const entry of await this.cache.list(sandboxId)) {
      let list: NetworkList;
      try {
        list = parseNetworkList(Buffer.from(entry.config, 'base64'), `cached config of ${entry.networkName}`);
      } catch (err) {
        this.log.warn({ sandbox: sandboxId, network: entry.networkName, err: (err as Error).message }, 'dropping unusable CNI cache entry');
        await this.cache.remove(entry.networkName, entry.containerId, entry.ifName);
        continue;
      }
      let prev: CniResult | undefined;
      try {
        prev = entry.result && parseResult(entry.result, `cache of network "${entry.networkName}"`);
      } catch {
        prev = undefined; // DEL without prevResult still releases what the plugins track themselves
      }
      jobs.push({
        list,
        inv: { containerId: sandboxId, netns, ifName: entry.ifName, args: entry.cniArgs ?? fallback.args, caps: entry.capabilityArgs ?? fallback.caps },
        ...(prev ? { prev } : {}),
        ...(entry.netns ? { cachedNetns: entry.netns } : {}),
      });
    }
    return jobs;
  }

  // ---- configuration discovery ----

  private notReadyMessage(): string {
    return this.o.defaultNetwork
      ? `CNI network "${this.o.defaultNetwork}" not found in ${this.o.confDir}`
      : `no valid CNI network config in ${this.o.confDir}`;
  }

  private async syncIfUnwatched(): Promise<void> {
    if (this.o.watch === false) await this.sync();
  }

  /** Re-reads the conf dir; serialized so overlapping triggers apply in order. */
  private sync(): Promise<void> {
    this.syncChain = this.syncChain.then(() => this.load()).catch((err: unknown) => {
      this.log.error({ dir: this.o.confDir, err: (err as Error).message }, 'cannot read CNI config dir');
    });
    return this.syncChain;
  }

  private async load(): Promise<void> {
    const before = this.defaultNet;
    const [lists, definitions] = await Promise.all([
      loadNetworks(this.o.confDir, this.log),
      // An unreadable networks dir must not keep the default network from loading.
      loadDefinitions(this.networksDir, this.log).catch((err: unknown) => {
        this.log.error({ dir: this.networksDir, err: (err as Error).message }, 'cannot read the network attachment definitions dir');
        return this.definitions;
      }),
    ]);
    this.confLists = lists;
    this.definitions = definitions;
    this.defaultNet = selectDefault(lists, this.o.defaultNetwork);
    const after = this.defaultNet;
    if (before?.name !== after?.name || before?.source !== after?.source || !before?.bytes.equals(after!.bytes)) {
      if (after) this.log.info({ network: after.name, file: after.source, cniVersion: after.cniVersion }, 'CNI default network updated');
      else this.log.warn({ dir: this.o.confDir }, `pod network not ready: ${this.notReadyMessage()}`);
    }
  }

  /** Follows the conf dir and the networks dir; a change in either re-reads both. */
  private startWatch(): void {
    this.watchers = [this.o.confDir, this.networksDir].map((dir) => new DirWatcher(dir, () => this.scheduleSync()));
    for (const w of this.watchers) w.start();
  }

  private scheduleSync(): void {
    if (this.closed) return;
    clearTimeout(this.debounceTimer);
    this.debounceTimer = setTimeout(() => {
      void this.sync().then(() => Promise.all(this.watchers.map((w) => w.checkStillThere())));
    }, WATCH_DEBOUNCE_MS);
    this.debounceTimer.unref();
  }
}

function validateRequest(r: PodNetworkRequest, needNetns: boolean): void {
  // The container ID ends up in file names (cache, host-local) and iptables comments.
  if (!/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/.test(r.sandboxId ?? '')) {
    throw new InvalidArgument(`invalid sandbox id ${JSON.stringify(r.sandboxId)} for pod network: letters, digits, '_', '.', '-' only`);
  }
  if (needNetns && !r.netnsPath) throw new InvalidArgument(`pod ${r.namespace}/${r.name} has no network namespace path`);
}

/**
 * Reverse of setup: secondary interfaces last-attached first (`order` is the attach order; ones it does
 * not know go first), then eth0, loopback last.
 */
function delOrder<T extends { inv: { ifName: string } }>(jobs: T[], order: string[]): T[] {
  const rank = (ifName: string) => (ifName === LOOPBACK_IFNAME ? -2 : ifName === POD_IFNAME ? -1 : order.indexOf(ifName) < 0 ? order.length : order.indexOf(ifName));
  return [...jobs].sort((a, b) => rank(b.inv.ifName) - rank(a.inv.ifName));
}

/** CNI_ARGS of a secondary attachment: the pod's, then the selection's cni-args. */
function attachmentArgs(podArgs: [string, string][], s: SecondaryPlan): [string, string][] {
  return [...podArgs, ...Object.entries(s.selection.cniArgs ?? {})];
}

function throwAll(errors: Error[], what: string): void {
  if (errors.length === 1) throw errors[0]!;
  if (errors.length > 1) throw new Internal(`${what}: ${errors.map((e) => e.message).join('; ')}`, { cause: errors });
}

function isLoopback(list: NetworkList, inv: Invocation): boolean {
  return list.name === LOOPBACK_NETWORK.name && inv.ifName === LOOPBACK_IFNAME;
}
