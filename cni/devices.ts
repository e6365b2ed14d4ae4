// Device-backed attachments: which of the pod's devices each attachment gets, and how a plugin is told.
// Pure.
import { InvalidArgument } from '../core/errors.js';
import { withPluginConfigs, type NetworkList } from './config.js';
import type { PodDevices } from './pod-resources.js';

/** The keys host-device names its device by; it refuses a config with more than one. */
const HOST_DEVICE_KEYS = ['device', 'hwaddr', 'kernelpath', 'pciBusID'];
// multus and the SR-IOV DRA driver write a claim as resourceName "<claim>/<request>", which the node cannot resolve.
const DRA_HINT = '; if it names a DRA claim and request (as multus reads it), name the device by the dra.minicri.io/driver ' +
  'annotation instead';
const PCI_ADDRESS = /^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$/;

/**
 * One device id per attachment that needs one (resourceName set), in order, each not used by an earlier
 * attachment of the pod. `names` name the attachments in errors; `podHasClaims` adds a hint for a definition
 * written for multus's DRA form.
 */
export function assignDevices(
  needs: { resourceName?: string; name: string }[],
  devices: PodDevices,
  podHasClaims = false,
): (string | undefined)[] {
  const used = new Set<string>();
  return needs.map(({ resourceName, name }) => {
    if (!resourceName) return undefined;
    const ids = devices.get(resourceName) ?? [];
    const id = ids.find((d) => !used.has(`${resourceName}\0${d}`));
    if (id === undefined) {
      throw new InvalidArgument(
        ids.length === 0
          ? `network ${name} needs a device of resource "${resourceName}", but kubelet allocated none to the pod: ` +
              `request ${resourceName} in a container's resources` + (podHasClaims ? DRA_HINT : '')
          : `network ${name} needs a device of resource "${resourceName}", but the pod's ${ids.length} (${ids.join(', ')}) ` +
              'are all taken by its other attachments: request one more',
      );
    }
    used.add(`${resourceName}\0${id}`);
    return id;
  });
}

/**
 * The list with `deviceId` written into the config of every plugin that does not take it as the
 * deviceID capability (runtimeConfig): as `deviceID`, which sriov-cni reads, and for host-device as
 * the key it reads (`pciBusID` for a PCI address, `device` for a link name).
 */
export function withDeviceId(list: NetworkList, deviceId: string): NetworkList {
  return withPluginConfigs(list, (raw, p) => {
    if (p.capabilities.includes('deviceID')) return raw;
    const withId: Record<string, unknown> = { ...raw, deviceID: deviceId };
    if (p.type === 'host-device') {
      // host-device takes exactly one way of naming its device: the allocated one replaces the definition's.
      for (const key of HOST_DEVICE_KEYS) delete withId[key];
      withId[PCI_ADDRESS.test(deviceId) ? 'pciBusID' : 'device'] = deviceId;
    }
    return withId;
  });
}
