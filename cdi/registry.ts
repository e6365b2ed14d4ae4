// The node's CDI devices: the spec files of the configured directories (/etc/cdi, /var/run/cdi by default; a
// later directory overrides an earlier one), read again whenever a file in them is added, changed or removed,
// and device nodes completed with the type and major/minor numbers of the node on the host.
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { InvalidArgument } from '../core/errors.js';
import { exists } from '../core/fs.js';
import type { Logger } from '../core/log.js';
import { editsFor, indexDevices, type DeviceIndex, type LoadedSpec, type OwnedEdits } from './edits.js';
import { parseCdiSpec, type CdiDevice, type CdiDeviceNode, type CdiSpec } from './spec.js';

export const DEFAULT_CDI_DIRS = ['/etc/cdi', '/var/run/cdi'];

/** What Status reports: the devices known and the files that could not be read. */
export interface CdiInventory {
  devices: string[];
  errors: Record<string, string>;
}

/** The host facts of a device node: what `stat` tells. */
export interface NodeStat {
  isCharacterDevice(): boolean;
  isBlockDevice(): boolean;
  isFIFO(): boolean;
  rdev: number;
  mode: number;
}

export class CdiRegistry {
  private signature = '';
  private index: DeviceIndex = { devices: new Map(), conflicts: new Map() };
  private errors: Record<string, string> = {};
  private loading?: Promise<void>;

  constructor(
    readonly dirs: readonly string[],
    private readonly log: Logger,
    private readonly statNode: (path: string) => Promise<NodeStat> = stat,
    private readonly hostLinkExists: (name: string) => Promise<boolean> = (name) => exists(join('/sys/class/net', name)),
  ) {}

  /** Reads the spec files again when any changed since the last look (one reading at a time). */
  async refresh(): Promise<void> {
    while (this.loading) await this.loading;
    this.loading = this.load().finally(() => { this.loading = undefined; });
    await this.loading;
  }

  async inventory(): Promise<CdiInventory> {
    await this.refresh();
    return { devices: [...this.index.devices.keys()].sort(), errors: { ...this.errors } };
  }

  /** A device by its qualified name, as its spec file defines it; undefined when none or several do. */
  async lookup(name: string): Promise<{ spec: CdiSpec; device: CdiDevice } | undefined> {
    await this.refresh();
    if (this.index.conflicts.has(name)) return undefined;
    const known = this.index.devices.get(name);
    return known && { spec: known.spec, device: known.device };
  }

  /**
   * The edits the devices bring, in the order they apply, device nodes completed from the host. Network
   * devices (netDevices) are left out: each belongs to the DRA-backed secondary network whose plugin moved it
   * into the pod, and one still on the host has no such network, which is refused rather than silently dropped.
   */
  async resolve(names: readonly string[]): Promise<OwnedEdits[]> {
    if (names.length === 0) return [];
    await this.refresh();
    const list = editsFor(names, this.index, this.dirs, Object.keys(this.errors));
    return Promise.all(list.map(async ({ owner, edits: { netDevices, ...edits } }) => {
      for (const n of netDevices ?? []) {
        if (await this.hostLinkExists(n.hostInterfaceName)) {
          throw new InvalidArgument(
            `${owner} moves host interface ${n.hostInterfaceName} into the container (netDevices), which minicri leaves to the pod's ` +
              `network that owns the device: define a network whose dra.minicri.io/driver annotation names its DRA driver and list it in ` +
              `the pod's k8s.v1.cni.cncf.io/networks`,
          );
        }
      }
      return {
        owner,
        edits: edits.deviceNodes
          ? { ...edits, deviceNodes: await Promise.all(edits.deviceNodes.map((d) => this.completeNode(owner, d))) }
          : edits,
      };
    }));
  }

  private async completeNode(owner: string, node: CdiDeviceNode): Promise<CdiDeviceNode> {
    const complete = node.type && node.type !== 'u' && node.major !== undefined && node.minor !== undefined && node.fileMode !== undefined;
    if (node.type === 'p' || complete) return node;
    const hostPath = node.hostPath ?? node.path;
    let st: NodeStat;
    try {
      st = await this.statNode(hostPath);
    } catch (err) {
      throw new InvalidArgument(`${owner}: device node ${hostPath} cannot be found on this node: ${(err as Error).message}`);
    }
    const type = st.isCharacterDevice() ? 'c' : st.isBlockDevice() ? 'b' : st.isFIFO() ? 'p' : undefined;
    if (!type) throw new InvalidArgument(`${owner}: ${hostPath} on this node is not a device node`);
    const dev = deviceNumbers(st.rdev);
    return {
      ...node,
      type: node.type || type,
      ...(type === 'p' ? {} : { major: node.major ?? dev.major, minor: node.minor ?? dev.minor }),
      fileMode: node.fileMode ?? (st.mode & 0o777),
    };
  }

  private async load(): Promise<void> {
    const files: { path: string; priority: number; key: string }[] = [];
    for (const [priority, dir] of this.dirs.entries()) {
      const names = await readdir(dir).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') this.log.warn({ dir, err: err.message }, 'CDI spec directory cannot be read');
        return [] as string[];
      });
      for (const name of names.filter((n) => /\.(json|ya?ml)$/.test(n)).sort()) {
        const path = join(dir, name);
        const st = await stat(path).catch(() => undefined);
        if (st?.isFile()) files.push({ path, priority, key: `${path}:${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}` });
      }
    }
    const signature = files.map((f) => f.key).join('\n');
    if (signature === this.signature) return;
    const specs: LoadedSpec[] = [];
    const errors: Record<string, string> = {};
    for (const f of files) {
      try {
        specs.push({ file: f.path, priority: f.priority, spec: parseCdiSpec(f.path, await readFile(f.path, 'utf8')) });
      } catch (err) {
        errors[f.path] = (err as Error).message;
      }
    }
    this.index = indexDevices(specs);
    this.errors = errors;
    this.signature = signature;
    this.log.info({ devices: this.index.devices.size, files: files.length, unreadable: Object.keys(errors) }, 'CDI spec files read');
  }
}

/** Linux's major and minor numbers of a dev_t. */
export function deviceNumbers(rdev: number): { major: number; minor: number } {
  const d = BigInt(rdev);
  return { major: Number(((d >> 8n) & 0xfffn) | ((d >> 32n) & ~0xfffn)), minor: Number((d & 0xffn) | ((d >> 12n) & 0xfff00n)) };
}
