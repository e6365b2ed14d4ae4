// The pod's request for networks, in the annotations multus reads: `k8s.v1.cni.cncf.io/networks` as a
// comma list (`net-a`, `other-ns/net-b`, `net-c@ifname`) or a JSON list of selection objects, and
// `v1.multus-cni.io/default-network` naming the network that replaces the default one on eth0.
// Pure: every problem is an InvalidArgument naming the annotation and what is wrong.
import { z } from 'zod';
import { InvalidArgument } from '../core/errors.js';
import { DNS_LABEL, DNS_SUBDOMAIN } from './attachment-definitions.js';
import { cidrFamily } from './result.js';

export const NETWORKS_ANNOTATION = 'k8s.v1.cni.cncf.io/networks';
export const DEFAULT_NETWORK_ANNOTATION = 'v1.multus-cni.io/default-network';
export const POD_IFNAME = 'eth0';
export const LOOPBACK_IFNAME = 'lo';

export interface SelectionPortMapping {
  hostPort: number;
  containerPort: number;
  protocol?: string;
  hostIP?: string;
}

export interface SelectionBandwidth {
  ingressRate?: number;
  ingressBurst?: number;
  egressRate?: number;
  egressBurst?: number;
}

/** One element of the request, as the NPWG spec's network selection element. */
export interface NetworkSelection {
  name: string;
  namespace: string;
  interface?: string;
  ips?: string[];
  mac?: string;
  defaultRoute?: string[];
  portMappings?: SelectionPortMapping[];
  bandwidth?: SelectionBandwidth;
  /** Extra CNI_ARGS, as key/value strings. */
  cniArgs?: Record<string, string>;
}

/** A selection with the interface it gets in the pod. */
export interface PlannedAttachment {
  selection: NetworkSelection;
  ifName: string;
}

const MAC = /^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$/;
const IP = /^(\d{1,3}(\.\d{1,3}){3}|[0-9a-fA-F:.]*:[0-9a-fA-F:.]*)$/;
const port = z.number().int().min(0).max(65535);
const rate = z.number().int().nonnegative();
// Values end up in CNI_ARGS (`K=V;K=V`), so neither may carry the separators; and a later key wins there, so
// a pod may not restate the identity the runtime gives every plugin (K8S_POD_NAME, IgnoreUnknown, ...).
const argKey = z.string().regex(/^[^=;]+$/, 'must not be empty or contain "=" or ";"');
const runtimeOwned = (k: string) => k.startsWith('K8S_') || k === 'IgnoreUnknown';
const argValue = z.union([z.string(), z.number(), z.boolean()]).transform(String).refine((v) => !v.includes(';'), 'must not contain ";"');

const selectionSchema = z.object({
  name: z.string({ error: 'is required' }).min(1, 'is required'),
  namespace: z.string().optional(),
  interface: z.string().optional(),
  ips: z.array(z.string().refine((s) => cidrFamily(s) !== undefined, 'must be an address with prefix length, such as 10.1.1.5/24'))
    .optional(),
  mac: z.string().regex(MAC, 'must be a MAC address such as 02:00:00:00:00:01').optional(),
  'default-route': z.array(z.string().regex(IP, 'must be an IP address')).optional(),
  portMappings: z.array(z.object({ hostPort: port, containerPort: port, protocol: z.string().optional(), hostIP: z.string().optional() }))
    .optional(),
  bandwidth: z
    .object({ ingressRate: rate.optional(), ingressBurst: rate.optional(), egressRate: rate.optional(), egressBurst: rate.optional() })
    .optional(),
  'cni-args': z.record(argKey, argValue)
    .refine((args) => !Object.keys(args).some(runtimeOwned), 'names a key set by the runtime (K8S_* and IgnoreUnknown cannot be given)')
    .optional(),
});

/** Parses the networks annotation; the pod's namespace is the default namespace of each element. */
export function parseNetworkSelections(value: string, podNamespace: string): NetworkSelection[] {
  const text = value.trim();
  if (text === '') return [];
  if (/^[[{"]/.test(text)) return parseJsonSelections(text, podNamespace, NETWORKS_ANNOTATION);
  return text.split(',').map((s) => s.trim()).filter((s) => s !== '').map((s) => parseShortForm(s, podNamespace, NETWORKS_ANNOTATION));
}

/** The one network named by the default-network annotation (either form, no interface of its own). */
export function parseDefaultNetworkSelection(value: string, podNamespace: string): NetworkSelection {
  const text = value.trim();
  const annotation = DEFAULT_NETWORK_ANNOTATION;
  const selections = /^[[{"]/.test(text)
    ? parseJsonSelections(text, podNamespace, annotation)
    : [parseShortForm(text, podNamespace, annotation)];
  if (selections.length !== 1) {
    throw new InvalidArgument(`annotation ${annotation} must name exactly one network, not ${selections.length}`);
  }
  const selection = selections[0]!;
  if (selection.interface !== undefined && selection.interface !== POD_IFNAME) {
    const asked = JSON.stringify(selection.interface);
    throw new InvalidArgument(`annotation ${annotation}: the default network is always on ${POD_IFNAME}, not ${asked}`);
  }
  return selection;
}

function parseShortForm(element: string, podNamespace: string, annotation: string): NetworkSelection {
  const m = /^(?:([^/@]*)\/)?([^/@]*)(?:@([^/@]*))?$/.exec(element);
  if (!m) throw new InvalidArgument(`annotation ${annotation}: ${JSON.stringify(element)} is not of the form [namespace/]name[@interface]`);
  const [, namespace, name, ifName] = m;
  const selection = { name: name!, namespace: namespace ?? podNamespace, ...(ifName !== undefined ? { interface: ifName } : {}) };
  return checked(selection, annotation, element);
}

function parseJsonSelections(text: string, podNamespace: string, annotation: string): NetworkSelection[] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new InvalidArgument(`annotation ${annotation} is not valid JSON: ${(err as Error).message}`);
  }
  if (!Array.isArray(json)) throw new InvalidArgument(`annotation ${annotation} must be a JSON list of network selection objects`);
  return json.map((element, i) => {
    const parsed = selectionSchema.safeParse(element);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      const field = issue.path.length > 0 ? ` field "${issue.path.join('.')}"` : '';
      throw new InvalidArgument(`annotation ${annotation}: element ${i + 1}${field} ${issue.message}`);
    }
    const e = parsed.data;
    return checked({
      name: e.name,
      namespace: e.namespace ?? podNamespace,
      ...(e.interface !== undefined ? { interface: e.interface } : {}),
      ...(e.ips ? { ips: e.ips } : {}),
      ...(e.mac ? { mac: e.mac.toLowerCase() } : {}),
      ...(e['default-route'] ? { defaultRoute: e['default-route'] } : {}),
      ...(e.portMappings ? { portMappings: e.portMappings } : {}),
      ...(e.bandwidth ? { bandwidth: e.bandwidth } : {}),
      ...(e['cni-args'] ? { cniArgs: e['cni-args'] } : {}),
    }, annotation, `element ${i + 1}`);
  });
}

function checked(s: NetworkSelection, annotation: string, what: string): NetworkSelection {
  if (!DNS_LABEL.test(s.namespace)) {
    throw new InvalidArgument(
      `annotation ${annotation}: ${what}: namespace ${JSON.stringify(s.namespace)} is not a valid namespace name ` +
        "(a DNS-1123 label: lower-case letters, digits and '-', at most 63)",
    );
  }
  if (!DNS_SUBDOMAIN.test(s.name)) {
    const name = JSON.stringify(s.name);
    throw new InvalidArgument(`annotation ${annotation}: ${what}: network name ${name} is not a valid object name (a DNS-1123 subdomain)`);
  }
  if (s.interface !== undefined) checkIfName(s.interface, `annotation ${annotation}: ${what}`);
  return s;
}

/** Linux interface names: 1 to 15 bytes, no '/', ':' or whitespace, not "." or "..". */
function checkIfName(name: string, where: string): void {
  if (name === '' || Buffer.byteLength(name) > 15 || /[/:\s]/.test(name) || name === '.' || name === '..') {
    const quoted = JSON.stringify(name);
    const rule = "1-15 characters, no '/', ':' or spaces";
    throw new InvalidArgument(`${where}: interface name ${quoted} is not a valid Linux interface name (${rule})`);
  }
}

/**
 * Gives each selection its interface: the one it asks for, else net<position> (net1 for the first), as
 * multus names them. Two attachments on one interface, or one on eth0 or lo, are refused.
 */
export function assignInterfaces(selections: NetworkSelection[]): PlannedAttachment[] {
  const used = new Map<string, string>([[POD_IFNAME, 'the default network'], [LOOPBACK_IFNAME, 'loopback']]);
  return selections.map((selection, i) => {
    const ifName = selection.interface ?? `net${i + 1}`;
    const owner = `${selection.namespace}/${selection.name}`;
    const taken = used.get(ifName);
    if (taken) {
      throw new InvalidArgument(
        `annotation ${NETWORKS_ANNOTATION}: network ${owner} would use interface ${ifName}, which ${taken} already uses: ` +
          'give each attachment its own "interface"',
      );
    }
    used.set(ifName, `network ${owner}`);
    return { selection, ifName };
  });
}

/** A selection as an element of the annotation's JSON form, which parseNetworkSelections reads back as it was. Pure. */
export function selectionElement(s: NetworkSelection): Record<string, unknown> {
  return {
    name: s.name,
    namespace: s.namespace,
    ...(s.interface !== undefined ? { interface: s.interface } : {}),
    ...(s.ips ? { ips: s.ips } : {}),
    ...(s.mac ? { mac: s.mac } : {}),
    ...(s.defaultRoute ? { 'default-route': s.defaultRoute } : {}),
    ...(s.portMappings ? { portMappings: s.portMappings } : {}),
    ...(s.bandwidth ? { bandwidth: s.bandwidth } : {}),
    ...(s.cniArgs ? { 'cni-args': s.cniArgs } : {}),
  };
}
