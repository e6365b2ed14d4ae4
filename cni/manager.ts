// The pod network manager: which network pods join (discovered from the conf dir, kept current by a
// watcher), and attaching/detaching/checking a pod through the plugin chain with a result cache so
// teardown always replays exactly what setup did.
import { promises as fs, watch, type FSWatcher } from 'node:fs';
import type { Logger } from '../core/log.js';
import type { TimelineEntry } from '../core/timeline.js';
import { FailedPrecondition, Internal, InvalidArgument } from '../core/errors.js';
import { netnsExists } from '../netns/netns.js';
import { capabilityArgs, cniArgs, cniArgsString, pluginStdin, type PortMapping } from './args.js';
import { ResultCache, CACHE_KIND, type CachedAttachment } from './cache.js';
import { loadNetworks, LOOPBACK_NETWORK, parseNetworkList, selectDefault, type NetworkList } from './config.js';
import { faultPoint } from '../core/faults.js';
import { execPlugin, findPlugin, type CniCommand, type ExecOptions } from './exec.js';
import { KeyedLock } from '../core/locks.js';
import { convertResult, parseResult, podIps, type CniResult } from './result.js';
import { versionAtLeast } from './version.js';

export interface CniManagerOptions {
  confDir: string;
  binDirs: string[];
  /** Where attachment results are cached (libcni layout); default /var/lib/cni. */
  cacheDir?: string;
  /** Network to use by name; default: the first valid config file in sorted order. */
  defaultNetwork?: string;
  /** Longest a single plugin call may run before it is killed; default 60s. */
  pluginTimeoutMs?: number;
  log: Logger;
  /** Follow changes of the conf dir (default true); without it the dir is re-read on every call. */
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
  /** Primary first (IPv4 before IPv6), then additional IPs. */
  ips: string[];
  /** Raw result per network (loopback, then the default network), for verbose status. */
  results: unknown[];
  /** How long each plugin's ADD took ("cni-add" steps naming the plugin), for the pod's startup timeline. */
  steps?: TimelineEntry[];
}

export const NETWORK_NOT_READY = 'NetworkPluginNotReady';
const POD_IFNAME = 'eth0';
const LOOPBACK_IFNAME = 'lo';
const WATCH_DEBOUNCE_MS = 100;
const WATCH_RETRY_MS = 1000;

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

export class CniManager {
  private defaultNet: NetworkList | undefined;
  private podCidr: string | undefined;
  private watcher: FSWatcher | undefined;
  private debounceTimer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private syncChain: Promise<void> = Promise.resolve();
  private closed = false;
  private readonly locks = new KeyedLock();
  private readonly cache: ResultCache;
  private readonly exec: ExecOptions;
  private readonly log: Logger;

  private constructor(private readonly o: CniManagerOptions) {
    this.log = o.log;
    this.cache = new ResultCache(o.cacheDir ?? '/var/lib/cni');
    this.exec = { binDirs: o.binDirs, timeoutMs: o.pluginTimeoutMs ?? 60_000, log: o.log };
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
      const net = this.defaultNet;
      if (!net) throw new FailedPrecondition(`cannot set up network for pod ${r.namespace}/${r.name}: ${this.notReadyMessage()}`);
      // Computed before any plugin runs: a bad bandwidth annotation fails here with nothing to undo.
      const args = cniArgs(r);
      const caps = capabilityArgs({ ...r, podCidr: this.podCidr });
      const steps: TimelineEntry[] = [];
      const inv = (ifName: string): Invocation => ({ containerId: r.sandboxId, netns: r.netnsPath, ifName, args, caps, steps });
      const started = performance.now();
      // lo and eth0 are separate interfaces set up by separate plugins: they can be attached at once.
      const [loSettled, mainSettled] = await Promise.allSettled([this.attach(LOOPBACK_NETWORK, inv(LOOPBACK_IFNAME)), this.attach(net, inv(POD_IFNAME))]);
      if (mainSettled.status === 'rejected' || loSettled.status === 'rejected') {
        // attach() already undid itself; undo the one that succeeded.
        const done = mainSettled.status === 'fulfilled' ? { list: net, ifName: POD_IFNAME, result: mainSettled.value }
          : loSettled.status === 'fulfilled' ? { list: LOOPBACK_NETWORK, ifName: LOOPBACK_IFNAME, result: loSettled.value } : undefined;
        if (done) {
          await this.detach(done.list, inv(done.ifName), done.result).catch((e: unknown) =>
            this.log.warn({ sandbox: r.sandboxId, err: (e as Error).message }, 'undoing half of a failed pod network setup failed'),
          );
        }
        throw mainSettled.status === 'rejected' ? mainSettled.reason : (loSettled as PromiseRejectedResult).reason;
      }
      const lo = loSettled.value;
      const main = mainSettled.value;
      this.log.debug({ sandbox: r.sandboxId, network: net.name, ms: Math.round(performance.now() - started) }, 'pod network set up');
      return { ips: podIps(main), results: [lo.raw, main.raw], steps };
    });
  }

  /** Detaches the pod from every network it was attached to; succeeds when there is nothing left to do. */
  async tearDownPod(r: PodNetworkRequest): Promise<void> {
    validateRequest(r, false);
    await this.locks.run(r.sandboxId, async () => {
      await this.syncIfUnwatched();
      // A vanished namespace is fine: plugins still release host-side state (IPs, iptables) on DEL.
      const netns = r.netnsPath && (await netnsExists(r.netnsPath)) ? r.netnsPath : '';
      const args = cniArgs(r);
      const caps = capabilityArgs({ ...r, podCidr: this.podCidr });
      const jobs = await this.cachedJobs(r.sandboxId, netns, { args, caps });
      const fallback = (list: NetworkList, ifName: string) => {
        if (!jobs.some((j) => j.inv.ifName === ifName)) jobs.push({ list, inv: { containerId: r.sandboxId, netns, ifName, args, caps } });
      };
      // An interface without a cache entry (cache lost, or setup died midway): DEL through the current config.
      if (this.defaultNet) fallback(this.defaultNet, POD_IFNAME);
      fallback(LOOPBACK_NETWORK, LOOPBACK_IFNAME);
      // Each interface's DEL is independent of the others': run them at once. Loopback needs none: its
      // only state is the interface, which ends with the namespace (ocicni does not DEL it either).
      const settled = await Promise.allSettled(jobs.map((job) => (isLoopback(job.list, job.inv)
        ? this.cache.remove(job.list.name, job.inv.containerId, job.inv.ifName)
        : this.detach(job.list, job.inv, job.prev))));
      const errors = settled.filter((s): s is PromiseRejectedResult => s.status === 'rejected').map((s) => s.reason as Error);
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
   * then (CNI >= 1.1.0) GC to every plugin of the default network with the valid attachments.
   */
  async gc(validSandboxIds: string[]): Promise<void> {
    const valid = new Set(validSandboxIds);
    const errors: Error[] = [];
    const stale = [...new Set((await this.cache.list()).map((e) => e.containerId))].filter((id) => !valid.has(id));
    for (const id of stale) {
      await this.locks.run(id, async () => {
        for (const job of delOrder(await this.cachedJobs(id, ''))) {
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
    if (net && versionAtLeast(net.cniVersion, '1.1.0') && !net.disableGC) {
      const attachments = validSandboxIds.map((containerID) => ({ containerID, ifname: POD_IFNAME }));
      for (const plugin of net.plugins) {
        const stdin = pluginStdin(net, plugin, { extra: { 'cni.dev/valid-attachments': attachments } });
        try {
          await execPlugin({ command: 'GC', pluginType: plugin.type, network: net.name, stdin }, this.exec);
        } catch (err) {
          errors.push(err as Error);
        }
      }
    }
    if (stale.length > 0) this.log.info({ removed: stale.length }, 'garbage-collected pod network attachments');
    throwAll(errors, 'CNI garbage collection');
  }

  close(): void {
    this.closed = true;
    this.watcher?.close();
    this.watcher = undefined;
    clearTimeout(this.debounceTimer);
    clearTimeout(this.retryTimer);
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
  private async cachedJobs(sandboxId: string, netns: string, fallback: { args: [string, string][]; caps: Record<string, unknown> } = { args: [], caps: {} }) {
    const jobs: { list: NetworkList; inv: Invocation; prev?: CniResult; cachedNetns?: string }[] = [];
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
    this.defaultNet = selectDefault(await loadNetworks(this.o.confDir, this.log), this.o.defaultNetwork);
    const after = this.defaultNet;
    if (before?.name !== after?.name || before?.source !== after?.source || !before?.bytes.equals(after!.bytes)) {
      if (after) this.log.info({ network: after.name, file: after.source, cniVersion: after.cniVersion }, 'CNI default network updated');
      else this.log.warn({ dir: this.o.confDir }, `pod network not ready: ${this.notReadyMessage()}`);
    }
  }

  /** fs.watch on the conf dir; while it does not exist (yet, or any more), retry until it does. */
  private startWatch(): void {
    if (this.closed) return;
    try {
      this.watcher = watch(this.o.confDir, () => this.scheduleSync());
      this.watcher.on('error', () => this.rewatch());
      // Changes between the first read and the watch starting would otherwise be missed.
      this.scheduleSync();
    } catch {
      this.retryTimer = setTimeout(() => this.startWatch(), WATCH_RETRY_MS);
      this.retryTimer.unref();
    }
  }

  private rewatch(): void {
    this.watcher?.close();
    this.watcher = undefined;
    this.scheduleSync();
    this.startWatch();
  }

  private scheduleSync(): void {
    if (this.closed) return;
    clearTimeout(this.debounceTimer);
    this.debounceTimer = setTimeout(() => {
      void this.sync().then(() => this.checkDirStillThere());
    }, WATCH_DEBOUNCE_MS);
    this.debounceTimer.unref();
  }

  /** inotify watches die with their directory; notice that and wait for the dir to come back. */
  private async checkDirStillThere(): Promise<void> {
    if (this.closed || !this.watcher) return;
    const exists = await fs.stat(this.o.confDir).then(
      () => true,
      () => false,
    );
    if (!exists) this.rewatch();
  }
}

function validateRequest(r: PodNetworkRequest, needNetns: boolean): void {
  // The container ID ends up in file names (cache, host-local) and iptables comments.
  if (!/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/.test(r.sandboxId ?? '')) {
    throw new InvalidArgument(`invalid sandbox id ${JSON.stringify(r.sandboxId)} for pod network: letters, digits, '_', '.', '-' only`);
  }
  if (needNetns && !r.netnsPath) throw new InvalidArgument(`pod ${r.namespace}/${r.name} has no network namespace path`);
}

/** Reverse of setup: pod interfaces first, loopback last. */
function delOrder<T extends { inv: { ifName: string } }>(jobs: T[]): T[] {
  return [...jobs].sort((a, b) => Number(a.inv.ifName === LOOPBACK_IFNAME) - Number(b.inv.ifName === LOOPBACK_IFNAME));
}

function throwAll(errors: Error[], what: string): void {
  if (errors.length === 1) throw errors[0]!;
  if (errors.length > 1) throw new Internal(`${what}: ${errors.map((e) => e.message).join('; ')}`, { cause: errors });
}

function isLoopback(list: NetworkList, inv: Invocation): boolean {
  return list.name === LOOPBACK_NETWORK.name && inv.ifName === LOOPBACK_IFNAME;
}
