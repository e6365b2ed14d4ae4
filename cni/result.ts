// CNI results (spec versions 0.3.0 .. 1.1.0): validation, conversion between versions, pod IPs.
// 0.3.x and 0.4.0 tag each IP with "version": "4"|"6" (the address tells us when a plugin omits it);
// 1.x dropped that field. Otherwise the shapes we rely on (interfaces, ips with interface index,
// routes, dns) are the same.
import { InvalidArgument } from '../core/errors.js';
import { isObject } from './config.js';
import { isSupportedVersion, versionAtLeast } from './version.js';

export interface CniInterface {
  name: string;
  mac?: string;
  /** Set for interfaces inside the pod's namespace (the netns path). */
  sandbox?: string;
}

export interface CniIpConfig {
  /** CIDR notation, e.g. 10.233.1.5/24. */
  address: string;
  gateway?: string;
  /** Index into interfaces. */
  interface?: number;
  family: 4 | 6;
}

export interface CniResult {
  cniVersion: string;
  interfaces: CniInterface[];
  ips: CniIpConfig[];
  /** The result exactly as the plugin returned it. */
  raw: Record<string, unknown>;
}

/** Validates a plugin's result. `source` names it in errors (plugin and network). */
export function parseResult(json: unknown, source: string): CniResult {
  if (!isObject(json)) throw new InvalidArgument(`CNI result from ${source} is not a JSON object`);
  const cniVersion = json.cniVersion;
  if (!isSupportedVersion(cniVersion)) {
    throw new InvalidArgument(`CNI result from ${source} has unsupported cniVersion ${JSON.stringify(cniVersion)}`);
  }
  const interfaces = optionalArray(json.interfaces, 'interfaces', source).map((i, n): CniInterface => {
    if (!isObject(i) || typeof i.name !== 'string') throw new InvalidArgument(`CNI result from ${source}: interface #${n} has no name`);
    return {
      name: i.name,
      ...(typeof i.mac === 'string' ? { mac: i.mac } : {}),
      ...(typeof i.sandbox === 'string' && i.sandbox !== '' ? { sandbox: i.sandbox } : {}),
    };
  });
  const legacy = !versionAtLeast(cniVersion, '1.0.0');
  const ips = optionalArray(json.ips, 'ips', source).map((ip, n): CniIpConfig => {
    const where = `CNI result from ${source}: ips[${n}]`;
    if (!isObject(ip) || typeof ip.address !== 'string') throw new InvalidArgument(`${where} has no address`);
    const family = cidrFamily(ip.address);
    if (family === undefined) throw new InvalidArgument(`${where} address ${JSON.stringify(ip.address)} is not in CIDR notation`);
    // Some plugins built on the 1.x Go library omit the tag in 0.3.x/0.4.0 results; a wrong tag is an error.
    if (legacy && ip.version !== undefined && ip.version !== String(family)) {
      throw new InvalidArgument(`${where} says version ${JSON.stringify(ip.version)} but ${ip.address} is IPv${family}`);
    }
    const index = ip.interface;
    if (index !== undefined && (!Number.isInteger(index) || (index as number) < 0 || (index as number) >= interfaces.length)) {
      throw new InvalidArgument(`${where} refers to interface ${JSON.stringify(ip.interface)} which the result does not list`);
    }
    return {
      address: ip.address,
      family,
      ...(typeof ip.gateway === 'string' ? { gateway: ip.gateway } : {}),
      ...(ip.interface !== undefined ? { interface: ip.interface as number } : {}),
    };
  });
  return { cniVersion, interfaces, ips, raw: json };
}

function optionalArray(v: unknown, field: string, source: string): unknown[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new InvalidArgument(`CNI result from ${source}: "${field}" is not an array`);
  return v;
}

/** 4 or 6 for an "addr/prefix" string, undefined when it is not one. */
export function cidrFamily(cidr: string): 4 | 6 | undefined {
  const slash = cidr.lastIndexOf('/');
  if (slash < 0) return undefined;
  const addr = cidr.slice(0, slash);
  const prefix = cidr.slice(slash + 1);
  if (!/^\d{1,3}$/.test(prefix)) return undefined;
  if (/^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.test(addr) && addr.split('.').every((o) => Number(o) <= 255)) {
    return Number(prefix) <= 32 ? 4 : undefined;
  }
  if (addr.includes(':') && /^[0-9a-fA-F:.]+$/.test(addr)) return Number(prefix) <= 128 ? 6 : undefined;
  return undefined;
}

/**
 * The result re-expressed for a config of `toVersion`, as a chained plugin expects its prevResult.
 * Only the per-IP "version" tag differs between the supported versions.
 */
export function convertResult(result: CniResult, toVersion: string): Record<string, unknown> {
  const legacy = !versionAtLeast(toVersion, '1.0.0');
  const rawIps = Array.isArray(result.raw.ips) ? result.raw.ips : [];
  const ips = rawIps.map((ip, n) => {
    const { version: _drop, ...rest } = ip as Record<string, unknown>;
    return legacy ? { version: String(result.ips[n]!.family), ...rest } : rest;
  });
  return { ...result.raw, cniVersion: toVersion, ...(result.raw.ips !== undefined ? { ips } : {}) };
}

/**
 * The pod's IPs from the default network's result: addresses on interfaces inside the sandbox (or not tied
 * to an interface), without prefix length, IPv4 first (kubelet takes the first as the primary), no duplicates.
 */
export function podIps(result: CniResult): string[] {
  const inPod = result.ips.filter((ip) => ip.interface === undefined || result.interfaces[ip.interface]?.sandbox !== undefined);
  const ordered = [...inPod.filter((ip) => ip.family === 4), ...inPod.filter((ip) => ip.family === 6)];
  return [...new Set(ordered.map((ip) => ip.address.slice(0, ip.address.lastIndexOf('/'))))];
}
