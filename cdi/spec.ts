// CDI spec files (Container Device Interface, spec versions 0.3 to 0.8, 1.0 which changed no field, and 1.1 which
// added network devices and Intel RDT's schemata and monitoring): the
// devices a vendor offers under one kind, and the container edits each brings. Parsing and name checks are pure.
import { z } from 'zod';
import { parse as parseYaml } from 'yaml';
import { InvalidArgument } from '../core/errors.js';
import { versionAtLeast } from '../core/version.js';

export interface CdiDeviceNode {
  /** Where the node appears in the container. */
  path: string;
  /** The node on the host; `path` when absent. */
  hostPath?: string;
  type?: string;
  major?: number;
  minor?: number;
  fileMode?: number;
  permissions?: string;
  uid?: number;
  gid?: number;
}

export interface CdiMount {
  hostPath: string;
  containerPath: string;
  type?: string;
  options?: string[];
}

export const CDI_HOOK_NAMES = ['prestart', 'createRuntime', 'createContainer', 'startContainer', 'poststart', 'poststop'] as const;
export type CdiHookName = (typeof CDI_HOOK_NAMES)[number];

export interface CdiHook {
  hookName: CdiHookName;
  path: string;
  args?: string[];
  env?: string[];
  timeout?: number;
}

export interface CdiIntelRdt {
  closID?: string;
  l3CacheSchema?: string;
  memBwSchema?: string;
  schemata?: string[];
  enableMonitoring?: boolean;
}

/** A host network interface moved into the container's network namespace (CDI 1.1). */
export interface CdiNetDevice {
  hostInterfaceName: string;
  /** Its name inside the container. */
  name: string;
}

/** Changes to a container's OCI spec. */
export interface CdiEdits {
  env?: string[];
  deviceNodes?: CdiDeviceNode[];
  mounts?: CdiMount[];
  hooks?: CdiHook[];
  additionalGids?: number[];
  intelRdt?: CdiIntelRdt;
  netDevices?: CdiNetDevice[];
}

export interface CdiDevice {
  name: string;
  annotations?: Record<string, string>;
  containerEdits: CdiEdits;
}

export interface CdiSpec {
  cdiVersion: string;
  /** `vendor/class`. */
  kind: string;
  annotations?: Record<string, string>;
  devices: CdiDevice[];
  /** Applied once to a container that gets any device of this spec. */
  containerEdits?: CdiEdits;
}

const uint32 = z.number().int().min(0).max(2 ** 32 - 1);
const deviceNode = z.object({
  path: z.string().min(1),
  hostPath: z.string().optional(),
  type: z.enum(['b', 'c', 'u', 'p', '']).optional(),
  major: z.number().int().min(0).optional(),
  minor: z.number().int().min(0).optional(),
  fileMode: z.number().int().min(0).max(0o7777).optional(),
  permissions: z.string().regex(/^[rwm]*$/, 'must be a combination of r, w and m').optional(),
  uid: uint32.optional(),
  gid: uint32.optional(),
});
const mount = z.object({
  hostPath: z.string().min(1),
  containerPath: z.string().min(1),
  type: z.string().optional(),
  options: z.array(z.string()).optional(),
});
const hook = z.object({
  hookName: z.enum(CDI_HOOK_NAMES),
  path: z.string().regex(/^\//, 'must be an absolute path'),
  args: z.array(z.string()).optional(),
  env: z.array(z.string().regex(/^[^=]+=/, 'must be NAME=value')).optional(),
  timeout: z.number().int().positive().optional(),
});
const edits = z.object({
  env: z.array(z.string().regex(/^[^=]+=/, 'must be NAME=value')).nullish(),
  deviceNodes: z.array(deviceNode).nullish(),
  mounts: z.array(mount).nullish(),
  hooks: z.array(hook).nullish(),
  additionalGids: z.array(uint32).nullish(),
  intelRdt: z.object({
    closID: z.string().optional(), l3CacheSchema: z.string().optional(), memBwSchema: z.string().optional(),
    schemata: z.array(z.string()).optional(), enableMonitoring: z.boolean().optional(),
  }).nullish(),
  netDevices: z.array(z.object({ hostInterfaceName: z.string(), name: z.string() })).nullish(),
});
const annotations = z.record(z.string(), z.string()).nullish();
const specSchema = z.object({
  cdiVersion: z.string(),
  kind: z.string(),
  annotations,
  devices: z.array(z.object({ name: z.string(), annotations, containerEdits: edits.nullish() })).min(1, 'must list at least one device'),
  containerEdits: edits.nullish(),
});

/** The versions read: 0.3.0 to 0.8.x, 1.0.x (the same fields as 0.8) and 1.1.x. */
export function isSupportedCdiVersion(version: string): boolean {
  if (!/^v?\d+\.\d+\.\d+$/.test(version)) return false;
  const within = (from: string, below: string) => versionAtLeast(version, from) && !versionAtLeast(version, below);
  return within('0.3.0', '0.9.0') || within('1.0.0', '1.2.0');
}

const VENDOR = /^[A-Za-z](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?$/;
const CLASS = /^[A-Za-z](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?$/;
const DEVICE = /^[A-Za-z0-9](?:[A-Za-z0-9_.:-]*[A-Za-z0-9])?$/;

/** A qualified device name `vendor.com/class=name`, split; InvalidArgument naming what is wrong. */
export function parseQualifiedName(name: string): { vendor: string; class: string; device: string } {
  const slash = name.indexOf('/');
  const eq = name.indexOf('=', slash + 1);
  if (slash < 1 || eq < 0) {
    throw new InvalidArgument(`CDI device "${name}" is not a fully qualified name: use vendor.com/class=name`);
  }
  const [vendor, klass, device] = [name.slice(0, slash), name.slice(slash + 1, eq), name.slice(eq + 1)];
  if (!VENDOR.test(vendor) || !CLASS.test(klass) || !DEVICE.test(device)) {
    throw new InvalidArgument(`CDI device "${name}" is not a valid name: vendor and class start with a letter, `
      + "the device name with a letter or digit; use letters, digits, '-', '_' and '.'");
  }
  return { vendor, class: klass, device };
}

/**
 * Reads one spec file's text (`file` says whether it is JSON or YAML, and names it in errors), checks the
 * version, kind, device names and that every field it uses exists in the version it declares.
 */
export function parseCdiSpec(file: string, text: string): CdiSpec {
  const bad = (why: string): never => { throw new InvalidArgument(`CDI spec ${file}: ${why}`); };
  let raw: unknown;
  try {
    raw = file.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    bad(`cannot be parsed: ${(err as Error).message.split('\n')[0]}`);
  }
  const result = specSchema.safeParse(raw);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    bad(`${issue.path.join('.') || 'the document'} ${issue.message}`);
  }
  const s = result.data!;
  if (!isSupportedCdiVersion(s.cdiVersion)) {
    bad(`cdiVersion "${s.cdiVersion}" is not one this runtime reads (0.3.0 to 0.8.x, 1.0.x, 1.1.x)`);
  }
  const [vendor = '', klass = '', ...more] = s.kind.split('/');
  if (more.length > 0 || !VENDOR.test(vendor) || !CLASS.test(klass)) bad(`kind "${s.kind}" is not vendor.com/class`);
  if (klass.includes('.') && !versionAtLeast(s.cdiVersion, '0.6.0')) {
    bad(`kind "${s.kind}" has a '.' in its class, which needs cdiVersion 0.6.0`);
  }
  const needs = (what: string, minor: number, major = 0): void => {
    if (versionAtLeast(s.cdiVersion, `${major}.${minor}.0`)) return;
    bad(`${what} needs cdiVersion ${major}.${minor}.0 or later, but the file says ${s.cdiVersion}`);
  };
  const checkEdits = (e: z.infer<typeof edits> | null | undefined, where: string): void => {
    if (!e) return;
    if (e.mounts?.some((m) => m.type !== undefined)) needs(`${where}: a mount type`, 4);
    if (e.deviceNodes?.some((d) => d.hostPath !== undefined)) needs(`${where}: a device node hostPath`, 5);
    if (e.additionalGids) needs(`${where}: additionalGids`, 7);
    if (e.intelRdt) needs(`${where}: intelRdt`, 7);
    if (e.intelRdt?.schemata !== undefined || e.intelRdt?.enableMonitoring !== undefined) {
      needs(`${where}: intelRdt schemata and enableMonitoring`, 1, 1);
    }
    if (e.netDevices) needs(`${where}: netDevices`, 1, 1);
    const inContainer = new Set<string>();
    for (const n of e.netDevices ?? []) {
      if (!isIfName(n.hostInterfaceName)) {
        bad(`${where}: net device hostInterfaceName "${n.hostInterfaceName}" is not a valid interface name`);
      }
      if (!isIfName(n.name)) bad(`${where}: net device name "${n.name}" is not a valid interface name`);
      if (inContainer.has(n.name)) bad(`${where}: two net devices are named "${n.name}" in the container`);
      inContainer.add(n.name);
    }
    for (const d of e.deviceNodes ?? []) if (!d.path.startsWith('/')) bad(`${where}: device node path "${d.path}" must be absolute`);
    for (const m of e.mounts ?? []) {
      if (!m.containerPath.startsWith('/')) bad(`${where}: mount containerPath "${m.containerPath}" must be absolute`);
    }
  };
  if (s.annotations) needs('annotations', 6);
  checkEdits(s.containerEdits, 'containerEdits');
  const seen = new Set<string>();
  for (const d of s.devices) {
    if (!DEVICE.test(d.name)) {
      bad(`device name "${d.name}" is not valid: start and end with a letter or digit; use letters, digits, '-', '_', '.' and ':'`);
    }
    if (/^[0-9]/.test(d.name)) needs(`device "${d.name}" (a name starting with a digit)`, 5);
    if (seen.has(d.name)) bad(`device "${d.name}" is listed twice`);
    seen.add(d.name);
    if (d.annotations) needs(`device "${d.name}" annotations`, 6);
    checkEdits(d.containerEdits, `device "${d.name}"`);
  }
  return {
    cdiVersion: s.cdiVersion, kind: s.kind, ...(s.annotations ? { annotations: s.annotations } : {}),
    devices: s.devices.map((d) => ({
      name: d.name, ...(d.annotations ? { annotations: d.annotations } : {}), containerEdits: cleanEdits(d.containerEdits),
    })),
    ...(s.containerEdits ? { containerEdits: cleanEdits(s.containerEdits) } : {}),
  };
}

/** Drops the nulls YAML and JSON allow for absent lists. */
function cleanEdits(e: z.infer<typeof edits> | null | undefined): CdiEdits {
  const out: CdiEdits = {};
  if (e?.env) out.env = e.env;
  if (e?.deviceNodes) out.deviceNodes = e.deviceNodes;
  if (e?.mounts) out.mounts = e.mounts;
  if (e?.hooks) out.hooks = e.hooks;
  if (e?.additionalGids) out.additionalGids = e.additionalGids;
  if (e?.intelRdt) out.intelRdt = e.intelRdt;
  if (e?.netDevices) out.netDevices = e.netDevices;
  return out;
}

/** A Linux interface name: 1 to 15 bytes, no '/', ':' or whitespace, not "." or "..". */
function isIfName(name: string): boolean {
  return name !== '' && Buffer.byteLength(name) <= 15 && !/[/:\s]/.test(name) && name !== '.' && name !== '..';
}

export const CDI_ANNOTATION_PREFIX = 'cdi.k8s.io/';

/**
 * The CDI devices a container asks for: `CDI_devices` first, then those of every `cdi.k8s.io/*` annotation
 * (a comma-separated list of qualified names), each once, in that order. Every name must be fully qualified.
 */
export function requestedCdiDevices(cdiDevices: ReadonlyArray<{ name: string }>, annotations: Readonly<Record<string, string>>): string[] {
  const names: string[] = cdiDevices.map((d) => d.name);
  for (const key of Object.keys(annotations).filter((k) => k.startsWith(CDI_ANNOTATION_PREFIX)).sort()) {
    for (const name of annotations[key]!.split(',')) {
      if (name.trim() === '') {
        throw new InvalidArgument(`annotation ${key} has an empty CDI device name: list vendor.com/class=name entries separated by commas`);
      }
      names.push(name.trim());
    }
  }
  for (const name of names) parseQualifiedName(name);
  return [...new Set(names)];
}
