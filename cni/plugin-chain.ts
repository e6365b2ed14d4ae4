// Running a network's plugin list for one attachment, with its entry in the result cache: ADD through the
// list (undone if any plugin fails, so nothing leaks), DEL back through it, CHECK; and, per network, the
// STATUS and GC verbs, which name no attachment.
import { faultPoint } from '../core/faults.js';
import { Internal } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { cniArgsString, pluginStdin } from './args.js';
import { cachedAttachment, throwAll, type Attachment, type PodInvocation } from './attachments.js';
import { CACHE_KIND, ResultCache, type CachedAttachment } from './cache.js';
import { parseNetworkList, type NetworkList } from './config.js';
import { execPlugin, findPlugin, type CniCommand, type ExecOptions, type PluginCall } from './exec.js';
import { convertResult, parseResult, type CniResult } from './result.js';
import { versionAtLeast } from './version.js';

export class PluginChain {
  private readonly exec: ExecOptions;
  readonly cache: ResultCache;

  constructor(
    cacheDir: string,
    readonly binDirs: string[],
    timeoutMs: number,
    private readonly log: Logger,
  ) {
    this.cache = new ResultCache(cacheDir);
    this.exec = { binDirs, timeoutMs, log };
  }

  /** ADD through the list; on a failure, DEL what ran (including the failed plugin) so nothing leaks. */
  async add(a: Attachment): Promise<CniResult> {
    const { list, inv } = a;
    let prev: CniResult | undefined;
    for (let i = 0; i < list.plugins.length; i++) {
      const plugin = list.plugins[i]!;
      try {
        const stdin = pluginStdin(list, plugin, { prevResult: prev && convertResult(prev, list.cniVersion), capabilityArgs: inv.caps });
        const started = performance.now();
        const out = await execPlugin(call('ADD', a, plugin.type, stdin), this.exec);
        inv.steps?.push({ step: 'cni-add', plugin: plugin.type, network: list.name, ms: performance.now() - started });
        if (out === undefined) throw new Internal(`CNI plugin "${plugin.type}" (network "${list.name}") ADD returned no result`);
        prev = parseResult(out, `plugin "${plugin.type}" of network "${list.name}"`);
        faultPoint(`cni-add:${plugin.type}`);
      } catch (err) {
        await this.undo(a, prev, i);
        throw err;
      }
    }
    const result = prev!;
    try {
      await this.cache.write(cacheEntry(a, result));
    } catch (err) {
      await this.undo(a, result, list.plugins.length - 1);
      const message = `cannot cache CNI result of network "${list.name}" in ${this.cache.dir}: ${(err as Error).message}`;
      throw new Internal(message, { cause: err });
    }
    return result;
  }

  /** DEL through the whole list in reverse (with the result ADD gave), then forget the cache entry. */
  async del(a: Attachment): Promise<void> {
    await this.delPlugins(a, a.prev, a.list.plugins.length - 1);
    await this.forget(a);
  }

  /** Drops the attachment's cache entry without a DEL. */
  async forget(a: Attachment): Promise<void> {
    await this.cache.remove(a.list.name, a.inv.containerId, a.inv.ifName);
  }

  /** CHECK through the list, for configs of CNI 0.4.0 or later that do not disable it. */
  async check(a: Attachment): Promise<void> {
    const { list, inv, prev } = a;
    if (!versionAtLeast(list.cniVersion, '0.4.0') || list.disableCheck) return;
    for (const plugin of list.plugins) {
      const stdin = pluginStdin(list, plugin, { prevResult: prev && convertResult(prev, list.cniVersion), capabilityArgs: inv.caps });
      await execPlugin(call('CHECK', a, plugin.type, stdin), this.exec);
    }
  }

  /** The first plugin of the lists not installed in any bin dir. */
  missingPlugin(lists: NetworkList[]): { list: NetworkList; type: string } | undefined {
    for (const list of lists) {
      const plugin = list.plugins.find((p) => !findPlugin(p.type, this.binDirs));
      if (plugin) return { list, type: plugin.type };
    }
    return undefined;
  }

  /** STATUS to each plugin (CNI 1.1.0 and later); throws the first that is not ready. */
  async status(list: NetworkList): Promise<void> {
    if (!versionAtLeast(list.cniVersion, '1.1.0')) return;
    for (const plugin of list.plugins) {
      await execPlugin({ command: 'STATUS', pluginType: plugin.type, network: list.name, stdin: pluginStdin(list, plugin) }, this.exec);
    }
  }

  /** GC to each plugin (CNI 1.1.0 and later, unless disabled) with the attachments that are still valid; returns the failures. */
  async gc(list: NetworkList, valid: { containerID: string; ifname: string }[]): Promise<Error[]> {
    if (!versionAtLeast(list.cniVersion, '1.1.0') || list.disableGC) return [];
    const errors: Error[] = [];
    for (const plugin of list.plugins) {
      const stdin = pluginStdin(list, plugin, { extra: { 'cni.dev/valid-attachments': valid } });
      try {
        await execPlugin({ command: 'GC', pluginType: plugin.type, network: list.name, stdin }, this.exec);
      } catch (err) {
        errors.push(err as Error);
      }
    }
    return errors;
  }

  /**
   * The sandbox's cached attachments, each with the config, args and result its ADD used, in namespace `netns`;
   * `fallback` gives args and capabilities to entries of an older minicri that did not cache them.
   */
  async cached(sandboxId: string, netns: string, fallback: Pick<PodInvocation, 'args' | 'caps'>): Promise<Attachment[]> {
    const out: Attachment[] = [];
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
      out.push(cachedAttachment(entry, list, prev, netns, fallback));
    }
    return out;
  }

  private async undo(a: Attachment, prev: CniResult | undefined, lastIndex: number): Promise<void> {
    try {
      await this.delPlugins(a, prev, lastIndex);
    } catch (err) {
      this.log.warn({ sandbox: a.inv.containerId, network: a.list.name, err: (err as Error).message }, 'undoing a failed CNI ADD failed');
    }
  }

  private async delPlugins(a: Attachment, prev: CniResult | undefined, lastIndex: number): Promise<void> {
    const { list, inv } = a;
    // prevResult on DEL exists since CNI 0.4.0.
    const prevResult = prev && versionAtLeast(list.cniVersion, '0.4.0') ? convertResult(prev, list.cniVersion) : undefined;
    // Every plugin gets its DEL even when a later one failed: one broken plugin must not keep the
    // IPAM plugin from releasing the address. DEL is idempotent, so a retry may repeat them all.
    const errors: Error[] = [];
    for (let i = lastIndex; i >= 0; i--) {
      const plugin = list.plugins[i]!;
      const stdin = pluginStdin(list, plugin, { prevResult, capabilityArgs: inv.caps });
      try {
        await execPlugin(call('DEL', a, plugin.type, stdin), this.exec);
      } catch (err) {
        errors.push(err as Error);
      }
      faultPoint(`cni-del:${plugin.type}`);
    }
    throwAll(errors, `deleting network "${list.name}" of ${inv.containerId}`);
  }
}

function call(command: CniCommand, { list, inv }: Attachment, pluginType: string, stdin: Buffer): PluginCall {
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

/** The cache entry of an attachment ADD just made, in libcni's layout. */
function cacheEntry({ list, inv }: Attachment, result: CniResult): CachedAttachment {
  return {
    kind: CACHE_KIND,
    containerId: inv.containerId,
    config: list.bytes.toString('base64'),
    ifName: inv.ifName,
    networkName: list.name,
    netns: inv.netns,
    cniArgs: inv.args,
    capabilityArgs: inv.caps,
    result: convertResult(result, list.cniVersion),
    attachedAt: performance.timeOrigin + performance.now(),
  };
}
