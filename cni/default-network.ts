// A working pod network out of the box: when the conf dir holds no network, write a bridge one.
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { InvalidArgument } from '../core/errors.js';
import { silentLogger } from '../core/log.js';
import { loadNetworks } from './config.js';
import { cidrFamily } from './result.js';

export const DEFAULT_NETWORK_FILE = '10-minicri.conflist';

/**
 * The default network list for `subnet`:
 * - bridge: pods get a veth pair whose host end joins the Linux bridge `minicri0` (created on first use).
 *   isGateway gives the bridge the subnet's first address and makes it the pods' default gateway;
 *   ipMasq NATs pod traffic leaving the subnet behind the host's address; hairpinMode lets a pod reach
 *   itself through a service IP that resolves back to it.
 * - ipam host-local: addresses come from `subnet`, one file per IP under /var/lib/cni/networks/minicri;
 *   the single route sends everything else through the gateway.
 * - portmap: turns the pod's hostPort mappings (the portMappings capability) into DNAT rules.
 */
export function defaultNetworkConfig(subnet: string): Record<string, unknown> {
  const family = cidrFamily(subnet);
  if (family === undefined) throw new InvalidArgument(`pod subnet ${JSON.stringify(subnet)} is not a CIDR such as 10.88.0.0/16`);
  return {
    cniVersion: '1.0.0',
    name: 'minicri',
    plugins: [
      {
        type: 'bridge',
        bridge: 'minicri0',
        isGateway: true,
        ipMasq: true,
        hairpinMode: true,
        ipam: {
          type: 'host-local',
          ranges: [[{ subnet }]],
          routes: [{ dst: family === 4 ? '0.0.0.0/0' : '::/0' }],
        },
      },
      { type: 'portmap', capabilities: { portMappings: true } },
    ],
  };
}

/** Writes the default network into `confDir` when it has no valid network; returns the file written, else null. */
export async function ensureDefaultNetwork(confDir: string, subnet: string): Promise<string | null> {
  const config = defaultNetworkConfig(subnet);
  if ((await loadNetworks(confDir, silentLogger)).length > 0) return null;
  await fs.mkdir(confDir, { recursive: true, mode: 0o755 });
  const file = path.join(confDir, DEFAULT_NETWORK_FILE);
  // Written under a name discovery ignores, then renamed, so a watcher never sees half a file.
  const tmp = path.join(confDir, `.${DEFAULT_NETWORK_FILE}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    await fs.writeFile(tmp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o644 });
    await fs.rename(tmp, file);
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
  return file;
}
