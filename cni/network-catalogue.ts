// The networks pods can join: the CNI conf dir, whose first valid network (or the one named) is the default
// network every pod gets on eth0, and the NetworkAttachmentDefinitions of the networks dir, the secondary
// networks pods ask for by annotation. Both dirs are followed by watchers and re-read together on a change.
import type { Logger } from '../core/log.js';
import { FailedPrecondition } from '../core/errors.js';
import { loadDefinitions, type AttachmentDefinition } from './attachment-definitions.js';
import { loadNetworks, selectDefault, type NetworkList } from './config.js';
import { DirWatcher } from './dir-watch.js';
import { planPodNetworks, type PodPlan } from './pod-plan.js';

const WATCH_DEBOUNCE_MS = 100;

export interface CatalogueOptions {
  confDir: string;
  networksDir: string;
  /** Network to use by name; default: the first valid config file in sorted order. */
  defaultNetwork?: string | undefined;
  log: Logger;
  /** Follow changes of both dirs; without it they are re-read on every `refresh`. */
  watch: boolean;
}

export class NetworkCatalogue {
  private defaultNet: NetworkList | undefined;
  private confLists: NetworkList[] = [];
  private definitions = new Map<string, AttachmentDefinition>();
  private watchers: DirWatcher[] = [];
  private debounceTimer: NodeJS.Timeout | undefined;
  private syncChain: Promise<void> = Promise.resolve();
  private closed = false;

  private constructor(private readonly o: CatalogueOptions) {}

  /** Reads both dirs, then follows them when watching. */
  static async open(o: CatalogueOptions): Promise<NetworkCatalogue> {
    const c = new NetworkCatalogue(o);
    await c.sync();
    if (o.watch) c.startWatch();
    return c;
  }

  get defaultNetwork(): NetworkList | undefined {
    return this.defaultNet;
  }

  /** The networks of the definitions that have a config of their own. */
  definedNetworks(): NetworkList[] {
    return [...this.definitions.values()].flatMap((def) => (def.list ? [def.list] : []));
  }

  /** Without watchers, re-reads the dirs so each call sees them as they are. */
  async refresh(): Promise<void> {
    if (!this.o.watch) await this.sync();
  }

  /** The networks the pod asked for, resolved; throws InvalidArgument naming what is wrong. */
  plan(pod: { name: string; namespace: string; annotations: Record<string, string> }): PodPlan {
    const net = this.defaultNet;
    if (!net) throw new FailedPrecondition(`cannot set up network for pod ${pod.namespace}/${pod.name}: ${this.notReadyMessage()}`);
    return planPodNetworks(pod.annotations, pod.namespace, {
      defaultNet: net, definitions: this.definitions, confLists: this.confLists, networksDir: this.o.networksDir, confDir: this.o.confDir,
    });
  }

  notReadyMessage(): string {
    return this.o.defaultNetwork
      ? `CNI network "${this.o.defaultNetwork}" not found in ${this.o.confDir}`
      : `no valid CNI network config in ${this.o.confDir}`;
  }

  close(): void {
    this.closed = true;
    for (const w of this.watchers) w.close();
    this.watchers = [];
    clearTimeout(this.debounceTimer);
  }

  /** Re-reads both dirs; serialized so overlapping triggers apply in order. */
  private sync(): Promise<void> {
    this.syncChain = this.syncChain.then(() => this.load()).catch((err: unknown) => {
      this.o.log.error({ dir: this.o.confDir, err: (err as Error).message }, 'cannot read CNI config dir');
    });
    return this.syncChain;
  }

  private async load(): Promise<void> {
    const { confDir, networksDir, log } = this.o;
    const before = this.defaultNet;
    const [lists, definitions] = await Promise.all([
      loadNetworks(confDir, log),
      // An unreadable networks dir must not keep the default network from loading.
      loadDefinitions(networksDir, log).catch((err: unknown) => {
        log.error({ dir: networksDir, err: (err as Error).message }, 'cannot read the network attachment definitions dir');
        return this.definitions;
      }),
    ]);
    this.confLists = lists;
    this.definitions = definitions;
    this.defaultNet = selectDefault(lists, this.o.defaultNetwork);
    const after = this.defaultNet;
    if (before?.name !== after?.name || before?.source !== after?.source || !before?.bytes.equals(after!.bytes)) {
      if (after) log.info({ network: after.name, file: after.source, cniVersion: after.cniVersion }, 'CNI default network updated');
      else log.warn({ dir: confDir }, `pod network not ready: ${this.notReadyMessage()}`);
    }
  }

  /** Follows the conf dir and the networks dir; a change in either re-reads both. */
  private startWatch(): void {
    this.watchers = [this.o.confDir, this.o.networksDir].map((dir) => new DirWatcher(dir, () => this.scheduleSync()));
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
