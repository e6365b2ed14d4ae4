// Which networks a pod joins, resolved from its annotations before any plugin runs: the default network
// (or the one `v1.multus-cni.io/default-network` puts in its place) on eth0, then each network of
// `k8s.v1.cni.cncf.io/networks` on its own interface. Pure: a bad request fails here with nothing to undo.
import { InvalidArgument } from '../core/errors.js';
import { definitionKey, type AttachmentDefinition } from './attachment-definitions.js';
import { isObject, type NetworkList } from './config.js';
import type { DraSelector } from './dra.js';
import {
  assignInterfaces,
  DEFAULT_NETWORK_ANNOTATION,
  NETWORKS_ANNOTATION,
  parseDefaultNetworkSelection,
  parseNetworkSelections,
  type NetworkSelection,
} from './network-selection.js';

export interface SecondaryPlan {
  /** "namespace/name" of the definition: the network's name in the pod's network status. */
  key: string;
  ifName: string;
  selection: NetworkSelection;
  list: NetworkList;
  resourceName?: string;
  dra?: DraSelector;
}

export interface PodPlan {
  main: NetworkList;
  /** The default network's name in the network status: the definition's key when the pod replaced it. */
  mainName: string;
  secondaries: SecondaryPlan[];
}

/** The networks known when a pod is planned (the network catalogue's, at that moment). */
export interface KnownNetworks {
  defaultNet: NetworkList;
  definitions: Map<string, AttachmentDefinition>;
  /** Every network of the CNI conf dir, for definitions without a config of their own. */
  confLists: NetworkList[];
  networksDir: string;
  confDir: string;
}

export function planPodNetworks(annotations: Record<string, string>, podNamespace: string, c: KnownNetworks): PodPlan {
  let main = c.defaultNet;
  let mainName = c.defaultNet.name;
  const replacement = annotations[DEFAULT_NETWORK_ANNOTATION];
  if (replacement !== undefined && replacement.trim() !== '') {
    const def = lookup(parseDefaultNetworkSelection(replacement, podNamespace), DEFAULT_NETWORK_ANNOTATION, c);
    main = listOf(def, c);
    mainName = definitionKey(def.namespace, def.name);
  }
  const planned = assignInterfaces(parseNetworkSelections(annotations[NETWORKS_ANNOTATION] ?? '', podNamespace));
  const secondaries = planned.map(({ selection, ifName }): SecondaryPlan => {
    const def = lookup(selection, NETWORKS_ANNOTATION, c);
    return {
      key: definitionKey(def.namespace, def.name),
      ifName,
      selection,
      list: listOf(def, c),
      ...(def.resourceName ? { resourceName: def.resourceName } : {}),
      ...(def.dra ? { dra: def.dra } : {}),
    };
  });
  checkDefaultRoutes(secondaries.map((s) => s.selection));
  return { main, mainName, secondaries };
}

/** One default route per address family at most: a second would replace the first's (no ECMP across networks). */
function checkDefaultRoutes(selections: NetworkSelection[]): void {
  const byFamily = new Map<string, string>();
  for (const s of selections) {
    for (const gateway of s.defaultRoute ?? []) {
      const family = gateway.includes(':') ? 'IPv6' : 'IPv4';
      const first = byFamily.get(family);
      if (first !== undefined) {
        const network = definitionKey(s.namespace, s.name);
        throw new InvalidArgument(
          `annotation ${NETWORKS_ANNOTATION}: two ${family} default routes requested (${first} and ${gateway} on network ${network}): ` +
            'a pod has one default route per address family',
        );
      }
      byFamily.set(family, gateway);
    }
  }
}

function lookup(s: NetworkSelection, annotation: string, c: KnownNetworks): AttachmentDefinition {
  const key = definitionKey(s.namespace, s.name);
  const def = c.definitions.get(key);
  if (!def) {
    const missing = `no NetworkAttachmentDefinition ${key} in ${c.networksDir}`;
    throw new InvalidArgument(`annotation ${annotation}: network ${key} is not defined: ${missing}`);
  }
  return def;
}

/** A definition's CNI network: its own config, else the conf dir's network of the same name (as multus allows). */
function listOf(def: AttachmentDefinition, c: KnownNetworks): NetworkList {
  const list = def.list ?? c.confLists.find((l) => l.name === def.name);
  if (!list) {
    const key = definitionKey(def.namespace, def.name);
    throw new InvalidArgument(
      `NetworkAttachmentDefinition ${key} (${def.source}) has no spec.config and ${c.confDir} has no CNI network named "${def.name}"`,
    );
  }
  return list;
}

/**
 * How an attachment of `list` can get a given address again (a restored pod's): through the `ips` capability a
 * plugin of it declares, or because its static IPAM fixes the address in the definition; else it cannot.
 */
export type AddressKeeping = 'ips-capability' | 'static-ipam' | 'none';

export function addressKeeping(list: NetworkList): AddressKeeping {
  if (list.plugins.some((p) => p.capabilities.includes('ips'))) return 'ips-capability';
  if (list.plugins.some((p) => isObject(p.raw.ipam) && p.raw.ipam.type === 'static')) return 'static-ipam';
  return 'none';
}
