// What CNI left on the host, for `minicri doctor`: cached attachments, host-local IP reservations
// and portmap's iptables chains, each with the container (sandbox) id it belongs to.
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../core/log.js';
import { run } from '../core/spawn.js';
import { loadDefinitions } from './attachment-definitions.js';
import { ResultCache } from './cache.js';
import { isObject, loadNetworks } from './config.js';

/** host-local's default data directory. */
const HOST_LOCAL_DATA_DIR = '/var/lib/cni/networks';

export interface HostLocalReservation {
  network: string;
  ip: string;
  containerId: string;
  file: string;
}

export interface PortmapChain {
  chain: string;
  containerId: string;
}

/** Sandbox ids with an entry in the result cache. */
export async function cachedAttachmentIds(cacheDir: string): Promise<string[]> {
  return [...new Set((await new ResultCache(cacheDir).list()).map((e) => e.containerId))];
}

/** The IPs host-local holds for the configured networks (the conf dir's and the defined secondary ones), with their owners. */
export async function hostLocalReservations(confDir: string, networksDir: string, log: Logger): Promise<HostLocalReservation[]> {
  const out: HostLocalReservation[] = [];
  const defined = [...(await loadDefinitions(networksDir, log)).values()].flatMap((d) => (d.list ? [d.list] : []));
  // Definitions may share a network (and so its reservation dir) with each other or the conf dir.
  const seen = new Set<string>();
  for (const network of [...(await loadNetworks(confDir, log)), ...defined]) {
    for (const plugin of network.plugins) {
      const ipam = plugin.raw.ipam;
      if (!isObject(ipam) || ipam.type !== 'host-local') continue;
      const dir = path.join(typeof ipam.dataDir === 'string' ? ipam.dataDir : HOST_LOCAL_DATA_DIR, network.name);
      if (seen.has(dir)) continue;
      seen.add(dir);
      const names = await fs.readdir(dir).catch(() => [] as string[]);
      for (const name of names.filter((n) => /^[0-9a-f.:]+$/i.test(n) && (n.includes('.') || n.includes(':')))) {
        const file = path.join(dir, name);
        const content = await fs.readFile(file, 'utf8').catch(() => '');
        out.push({ network: network.name, ip: name, containerId: content.split(/\r?\n/)[0]!.trim(), file });
      }
    }
  }
  return out;
}

export async function removeReservation(r: HostLocalReservation): Promise<void> {
  await fs.rm(r.file, { force: true });
}

/** Per-pod chains portmap made (CNI-DN-* for DNAT, CNI-SN-* for hairpin SNAT), found by their id comments. */
export async function portmapChains(): Promise<PortmapChain[]> {
  return parsePortmapChains(await natTable(['-S']));
}

/** Chains of `iptables -t nat -S` output whose rules carry portmap's `id: "<container id>"` comment. */
export function parsePortmapChains(rules: string): PortmapChain[] {
  const owners = new Map<string, string>();
  for (const rule of rules.split('\n')) {
    // portmap comments the jump into a pod's chain: `... --comment "dnat name: \"net\" id: \"<id>\"" ... -j CNI-DN-…`.
    const id = /id: \\?"([0-9a-f]{8,})\\?"/.exec(rule)?.[1];
    const chain = /-j (CNI-(?:DN|SN)-\S+)/.exec(rule)?.[1];
    if (rule.startsWith('-A ') && id && chain) owners.set(chain, id);
  }
  return [...owners].map(([chain, containerId]) => ({ chain, containerId }));
}

/** Removes the jumps into a chain, then the chain. */
export async function removePortmapChain(chain: string): Promise<void> {
  const rules = (await natTable(['-S'])).split('\n');
  for (const rule of rules) {
    const m = /^-A (\S+) (.*)$/.exec(rule);
    if (m && m[1] !== chain && new RegExp(`-j ${chain}(\\s|$)`).test(m[2]!)) {
      // Through a shell: the rule as -S printed it quotes its comment.
      await run('sh', ['-c', `iptables -w -t nat -D ${m[1]} ${m[2]}`]);
    }
  }
  await natTable(['-F', chain]);
  await natTable(['-X', chain]);
}

/** What an iptables command on the nat table printed; nothing when it failed or there is no iptables (nor rules). */
function natTable(args: string[]): Promise<string> {
  return run('iptables', ['-w', '-t', 'nat', ...args]).then((r) => r.stdout, () => '');
}
