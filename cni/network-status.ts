// The pod's attachments in the format multus writes to the `k8s.v1.cni.cncf.io/network-status`
// annotation (NPWG spec): one entry per attachment, the default network marked `default: true`. Pure.
import { isObject } from './config.js';
import type { CniResult } from './result.js';

export interface NetworkStatusEntry {
  name: string;
  interface?: string;
  ips?: string[];
  mac?: string;
  default?: boolean;
  dns: { nameservers?: string[]; domain?: string; search?: string[]; options?: string[] };
  'device-info'?: Record<string, unknown>;
  gateway?: string[];
}

/** The entry for one attachment: `name` is the network ("namespace/name" for a secondary one). */
export function networkStatusEntry(
  name: string,
  ifName: string,
  result: CniResult,
  opts: { isDefault?: boolean; gateway?: string[] } = {},
): NetworkStatusEntry {
  const { cidrs, mac } = attachmentAddresses(result, ifName);
  const ips = cidrs.map((cidr) => cidr.slice(0, cidr.lastIndexOf('/')));
  const deviceInfo = result.raw['device-info'];
  return {
    name,
    interface: ifName,
    ...(ips.length > 0 ? { ips } : {}),
    ...(mac ? { mac } : {}),
    ...(opts.isDefault ? { default: true } : {}),
    dns: dnsOf(result.raw.dns),
    ...(isObject(deviceInfo) ? { 'device-info': deviceInfo } : {}),
    ...(opts.gateway && opts.gateway.length > 0 ? { gateway: opts.gateway } : {}),
  };
}

/** The addresses (CIDRs) and MAC of the pod's interface `ifName` in an attachment's result. */
export function attachmentAddresses(result: CniResult, ifName: string): { cidrs: string[]; mac?: string } {
  // The interface the plugin made inside the pod; plugins that list none (ipvlan in L3 mode, test
  // plugins) still own every IP they returned.
  const index = result.interfaces.findIndex((i) => i.name === ifName && i.sandbox !== undefined);
  const cidrs = result.ips.filter((ip) => index < 0 || ip.interface === undefined || ip.interface === index).map((ip) => ip.address);
  const mac = index >= 0 ? result.interfaces[index]!.mac : undefined;
  return { cidrs, ...(mac ? { mac } : {}) };
}

function dnsOf(raw: unknown): NetworkStatusEntry['dns'] {
  if (!isObject(raw)) return {};
  const strings = (v: unknown) => (Array.isArray(v) ? v.filter((s): s is string => typeof s === 'string') : []);
  const out: NetworkStatusEntry['dns'] = {};
  for (const key of ['nameservers', 'search', 'options'] as const) {
    const list = strings(raw[key]);
    if (list.length > 0) out[key] = list;
  }
  if (typeof raw.domain === 'string' && raw.domain !== '') out.domain = raw.domain;
  return out;
}
