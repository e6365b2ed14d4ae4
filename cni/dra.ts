// Secondary networks whose device comes from Dynamic Resource Allocation, node-local: which allocated device
// (kubelet's pod-resources answer) each attachment gets, what the CNI plugin is told about it (from the
// device's CDI spec on the node), and the status a node agent can publish to the claim (KEP-4817's
// AllocatedDeviceStatus). Pure: the manager feeds in kubelet's answer and the CDI lookup.
import { InvalidArgument } from '../core/errors.js';
import type { CdiDevice, CdiSpec } from '../cdi/spec.js';
import type { DraClaim, DraDevice } from './pod-resources.js';

/** NetworkAttachmentDefinition annotations naming where a network's device comes from. */
export const DRA_DRIVER_ANNOTATION = 'dra.minicri.io/driver';
export const DRA_POOL_ANNOTATION = 'dra.minicri.io/pool';
export const DRA_CLAIM_ANNOTATION = 'dra.minicri.io/claim';
/** On a CDI device: its PCI address, for plugins that take one (sriov-cni, host-device's pciBusID). */
export const CDI_PCI_ADDRESS_ANNOTATION = 'dra.minicri.io/pci-address';

const PCI_ADDRESS = /^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$/;

/** Which allocated devices may back a network: a driver's, optionally of one pool and of one claim (by its own name). */
export interface DraSelector {
  driver: string;
  pool?: string;
  claim?: string;
}

/** The device one attachment got. */
export interface DraAssignment {
  claim: { namespace: string; name: string };
  device: DraDevice;
}

export function describeSelector(s: DraSelector): string {
  return [`DRA driver "${s.driver}"`, s.pool ? `pool "${s.pool}"` : '', s.claim ? `claim "${s.claim}"` : ''].filter(Boolean).join(', ');
}

/**
 * One allocated device per attachment that takes one (a selector), in the pod's order, each not used by an
 * earlier attachment; claims and their devices in kubelet's order. `pod` and each need's `name` are for errors.
 */
export function assignDraDevices(
  needs: { name: string; dra?: DraSelector }[],
  claims: DraClaim[],
  pod: string,
): (DraAssignment | undefined)[] {
  const used = new Set<DraDevice>();
  return needs.map(({ name, dra }) => {
    if (!dra) return undefined;
    const scope = dra.claim ? claims.filter((c) => c.name === dra.claim) : claims;
    const matching = scope.flatMap((claim) =>
      claim.devices.filter((d) => d.driver === dra.driver && (!dra.pool || d.pool === dra.pool)).map((device) => ({ claim, device })));
    const free = matching.find((m) => !used.has(m.device));
    if (free) {
      used.add(free.device);
      return { claim: { namespace: free.claim.namespace, name: free.claim.name }, device: free.device };
    }
    const why = whyNone(dra, scope, claims, matching.length);
    throw new InvalidArgument(`network ${name} needs a device of ${describeSelector(dra)} for pod ${pod}, but ${why}`);
  });
}

function whyNone(dra: DraSelector, scope: DraClaim[], claims: DraClaim[], matching: number): string {
  if (matching > 0) return `the pod's ${matching} such device(s) are all taken by its other attachments: allocate one more`;
  const visible = 'kubelet reports a claim only when a container lists it in resources.claims';
  if (dra.claim && scope.length === 0) {
    const held = claims.length > 0 ? `it holds ${claims.map((c) => `"${c.name}"`).join(', ')}` : 'it holds no claim';
    return `kubelet's pod-resources answer does not hold claim "${dra.claim}" (${held}): ${visible}`;
  }
  const unallocated = scope.filter((c) => c.devices.length === 0);
  if (unallocated.length > 0) {
    return `claim ${unallocated.map((c) => `"${c.name}"`).join(', ')} is not allocated yet (kubelet reports no device of it)`;
  }
  if (scope.length === 0) return `kubelet's pod-resources answer holds no ResourceClaim of the pod: ${visible}`;
  const have = scope.flatMap((c) => c.devices.map((d) => `${d.driver}/${d.pool}/${d.device} of claim "${c.name}"`));
  return `none of the pod's allocated devices matches (${have.join('; ')})`;
}

/** A CDI device as the registry knows it. */
export interface KnownCdiDevice {
  spec: CdiSpec;
  device: CdiDevice;
}

/**
 * What the CNI plugin is told about an allocated device (its `deviceID`): the host interface its CDI spec
 * moves into the container (netDevices), else the PCI address annotated on the CDI device, else a PCI
 * address the device's own environment gives (the only place some drivers put it). `cdiName` names the CDI
 * device it came from.
 */
export function pluginDevice(a: DraAssignment, lookup: (cdiName: string) => KnownCdiDevice | undefined, cdiDirs: readonly string[]):
  { deviceId: string; cdiName: string } {
  const what = `device ${a.device.driver}/${a.device.pool}/${a.device.device} of claim ${a.claim.namespace}/${a.claim.name}`;
  if (a.device.cdiDevices.length === 0) {
    throw new InvalidArgument(`${what} has no CDI device: its driver published none for it, so minicri cannot tell which interface it is`);
  }
  const found = a.device.cdiDevices.flatMap((cdiName) => {
    const known = lookup(cdiName);
    return known ? [{ cdiName, ...known }] : [];
  });
  if (found.length === 0) {
    const names = a.device.cdiDevices.join(', ');
    throw new InvalidArgument(`${what} has no CDI spec on this node: no spec file in ${cdiDirs.join(', ')} defines ${names}`);
  }
  for (const { cdiName, device } of found) {
    const netdev = device.containerEdits.netDevices?.[0]?.hostInterfaceName;
    if (netdev) return { deviceId: netdev, cdiName };
    const annotated = device.annotations?.[CDI_PCI_ADDRESS_ANNOTATION];
    if (annotated !== undefined) {
      if (!PCI_ADDRESS.test(annotated)) {
        throw new InvalidArgument(`CDI device "${cdiName}" has ${CDI_PCI_ADDRESS_ANNOTATION} "${annotated}", which is not a PCI address`);
      }
      return { deviceId: annotated.toLowerCase(), cdiName };
    }
  }
  for (const { cdiName, device } of found) {
    const addresses = new Set((device.containerEdits.env ?? []).map((e) => e.slice(e.indexOf('=') + 1)).filter((v) => PCI_ADDRESS.test(v)));
    if (addresses.size === 1) return { deviceId: [...addresses][0]!.toLowerCase(), cdiName };
  }
  throw new InvalidArgument(
    `${what}: its CDI device ${found.map((f) => `"${f.cdiName}"`).join(', ')} names neither a network interface (netDevices) nor a PCI ` +
      `address (the ${CDI_PCI_ADDRESS_ANNOTATION} annotation, or one environment variable holding one)`,
  );
}

/** KEP-4817's AllocatedDeviceStatus with its NetworkDeviceData, as ResourceClaim.status.devices[] holds it. */
export interface AllocatedDeviceStatus {
  driver: string;
  pool: string;
  device: string;
  /** The attachment's entry in multus's network-status form. */
  data?: Record<string, unknown>;
  networkData: { interfaceName: string; ips?: string[]; hardwareAddress?: string };
}

/** One DRA-backed attachment's entry in the pod's device status. */
export interface DraAttachmentStatus {
  /** The network ("namespace/name" of its definition) and the pod's interface. */
  network: string;
  interface: string;
  claim: { namespace: string; name: string };
  cdiDevice: string;
  /** What the plugin got as deviceID. */
  deviceId: string;
  status: AllocatedDeviceStatus;
}

export function draAttachmentStatus(
  network: string,
  ifName: string,
  a: DraAssignment,
  device: { deviceId: string; cdiName: string },
  addresses: { cidrs: string[]; mac?: string },
  networkStatus: object,
): DraAttachmentStatus {
  return {
    network,
    interface: ifName,
    claim: a.claim,
    cdiDevice: device.cdiName,
    deviceId: device.deviceId,
    status: {
      driver: a.device.driver,
      pool: a.device.pool,
      device: a.device.device,
      data: { ...networkStatus },
      networkData: {
        interfaceName: ifName,
        ...(addresses.cidrs.length > 0 ? { ips: addresses.cidrs } : {}),
        ...(addresses.mac ? { hardwareAddress: addresses.mac } : {}),
      },
    },
  };
}

/** The per-pod file a node agent reads: each DRA-backed attachment's status, and the pod's network-status. */
export interface PodDeviceStatusFile {
  pod: { namespace: string; name: string; uid: string; sandboxId: string };
  devices: DraAttachmentStatus[];
  networkStatus: object[];
}

/** multus's `device-info` (NPWG device information spec) for a PCI device a plugin got; none for a netdev. */
export function deviceInfo(deviceId: string): Record<string, unknown> | undefined {
  return PCI_ADDRESS.test(deviceId) ? { type: 'pci', version: '1.0.0', pci: { 'pci-address': deviceId } } : undefined;
}
