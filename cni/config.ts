// Network configuration: parsing .conf/.conflist/.json files, discovery order, default selection.
// Parsing is pure; only loadNetworks touches the disk.
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../core/log.js';
import { InvalidArgument } from '../core/errors.js';
import { compareVersions, isSupportedVersion, SUPPORTED_VERSIONS } from './version.js';

export interface PluginConf {
  type: string;
  /** Capabilities the plugin declares as enabled; only these get runtimeConfig keys. */
  capabilities: string[];
  /** The plugin's config object as written, the base of what it gets on stdin. */
  raw: Record<string, unknown>;
}

export interface NetworkList {
  name: string;
  cniVersion: string;
  disableCheck: boolean;
  disableGC: boolean;
  plugins: PluginConf[];
  /** Exact bytes of the list (a single .conf is wrapped into a list); cached with each attachment. */
  bytes: Buffer;
  /** Where the list came from, for logs. */
  source: string;
}

export const CONF_EXTENSIONS = ['.conf', '.conflist', '.json'];

/**
 * Always attached first, on `lo`, so every pod has a working loopback. CNI 0.4.0 is the oldest version
 * with CHECK and prevResult on DEL, and one every loopback plugin release of the last years accepts.
 */
export const LOOPBACK_NETWORK: NetworkList = parseNetworkList(
  Buffer.from(JSON.stringify({ cniVersion: '0.4.0', name: 'cni-loopback', plugins: [{ type: 'loopback' }] })),
  'built-in',
);

/** The files to consider, in the order that decides the default network (plain byte order). */
export function confFileOrder(names: string[]): string[] {
  return names.filter((n) => CONF_EXTENSIONS.includes(path.extname(n)) && !n.startsWith('.')).sort(compareBytes);
}

function compareBytes(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The list with each plugin's config replaced by what `change` makes of it (the list's own keys kept). */
export function withPluginConfigs(
  list: NetworkList,
  change: (raw: Record<string, unknown>, plugin: PluginConf) => Record<string, unknown>,
): NetworkList {
  const conf = JSON.parse(list.bytes.toString('utf8')) as Record<string, unknown>;
  conf.plugins = list.plugins.map((p) => change(p.raw, p));
  return parseNetworkList(Buffer.from(JSON.stringify(conf)), list.source);
}

/**
 * Parses one config file. A `.conflist` (or any object with `plugins`) is a list; otherwise it is a
 * single plugin config, wrapped into a one-plugin list. Throws InvalidArgument saying what is wrong.
 */
export function parseNetworkList(bytes: Buffer, source: string): NetworkList {
  let obj: unknown;
  try {
    obj = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    throw new InvalidArgument(`CNI config ${source} is not valid JSON: ${(err as Error).message}`);
  }
  if (!isObject(obj)) throw new InvalidArgument(`CNI config ${source} is not a JSON object`);
  const isList = source.endsWith('.conflist') || 'plugins' in obj;
  const cniVersion = pickVersion(obj, source);
  const name = obj.name;
  if (typeof name !== 'string' || !/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/.test(name)) {
    throw new InvalidArgument(`CNI config ${source} has an invalid or missing "name" ${JSON.stringify(name)}`);
  }
  if (!isList) {
    const plugin = parsePlugin(obj, source, 0);
    const wrapped = Buffer.from(JSON.stringify({ cniVersion, name, plugins: [obj] }));
    return { name, cniVersion, disableCheck: false, disableGC: false, plugins: [plugin], bytes: wrapped, source };
  }
  if (!Array.isArray(obj.plugins) || obj.plugins.length === 0) {
    throw new InvalidArgument(`CNI config list ${source} has no "plugins"`);
  }
  const plugins = obj.plugins.map((p, i) => parsePlugin(p, source, i));
  return {
    name,
    cniVersion,
    disableCheck: obj.disableCheck === true || obj.disableCheck === 'true',
    disableGC: obj.disableGC === true || obj.disableGC === 'true',
    plugins,
    bytes,
    source,
  };
}

/** `cniVersion`, or with CNI 1.1's `cniVersions` the highest one we support. */
function pickVersion(obj: Record<string, unknown>, source: string): string {
  if (Array.isArray(obj.cniVersions)) {
    const ours = obj.cniVersions.filter(isSupportedVersion).sort(compareVersions);
    if (ours.length > 0) return ours[ours.length - 1]!;
  }
  if (!isSupportedVersion(obj.cniVersion)) {
    throw new InvalidArgument(
      `CNI config ${source} has unsupported cniVersion ${JSON.stringify(obj.cniVersion)} (supported: ${SUPPORTED_VERSIONS.join(', ')})`,
    );
  }
  return obj.cniVersion;
}

function parsePlugin(p: unknown, source: string, index: number): PluginConf {
  if (!isObject(p)) throw new InvalidArgument(`CNI config ${source}: plugin #${index} is not an object`);
  // The type names a binary in the bin dirs: no path separators.
  if (typeof p.type !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(p.type)) {
    throw new InvalidArgument(`CNI config ${source}: plugin #${index} has an invalid or missing "type" ${JSON.stringify(p.type)}`);
  }
  const declared = isObject(p.capabilities) ? p.capabilities : {};
  const caps = Object.keys(declared).filter((k) => declared[k] === true);
  return { type: p.type, capabilities: caps, raw: p };
}

/** The configured network by name, else the first list in discovery order. */
export function selectDefault(lists: NetworkList[], name?: string): NetworkList | undefined {
  return name ? lists.find((l) => l.name === name) : lists[0];
}

/** Reads every valid network in `confDir` in discovery order; invalid files are logged and skipped. */
export async function loadNetworks(confDir: string, log: Logger): Promise<NetworkList[]> {
  let names: string[];
  try {
    names = await fs.readdir(confDir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const lists: NetworkList[] = [];
  const seen = new Set<string>();
  for (const name of confFileOrder(names)) {
    const file = path.join(confDir, name);
    let bytes: Buffer;
    try {
      bytes = await fs.readFile(file);
    } catch (err) {
      // Removed between readdir and read, or a directory named *.conf.
      log.warn({ file, err: (err as Error).message }, 'skipping unreadable CNI config file');
      continue;
    }
    try {
      const list = parseNetworkList(bytes, file);
      if (seen.has(list.name)) {
        log.warn({ file, network: list.name }, 'skipping CNI config: an earlier file defines the same network name');
        continue;
      }
      seen.add(list.name);
      lists.push(list);
    } catch (err) {
      log.warn({ file, reason: (err as Error).message }, 'skipping invalid CNI config file');
    }
  }
  return lists;
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
