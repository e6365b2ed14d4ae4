// RuntimeConfig and UpdateRuntimeConfig: the cgroup driver kubelet must match, and the pod CIDR it hands us.
import { isIP } from 'node:net';
import { InvalidArgument } from '../core/errors.js';
import type { Deps } from '../pod/context.js';
import type { RuntimeHandlers } from './runtime-service.js';

/** kubelet sends one CIDR, or an IPv4 and an IPv6 one joined by a comma. */
export function parsePodCidrs(value: string): string[] {
  const cidrs = value.split(',').map((s) => s.trim()).filter(Boolean);
  for (const cidr of cidrs) {
    const [address, bits, extra] = cidr.split('/');
    const family = isIP(address ?? '');
    const prefix = Number(bits);
    if (extra !== undefined || family === 0 || !/^\d+$/.test(bits ?? '') || prefix > (family === 4 ? 32 : 128)) {
      throw new InvalidArgument(`pod CIDR "${cidr}" is not a valid CIDR (expected e.g. 10.244.1.0/24)`);
    }
  }
  return cidrs;
}

export function runtimeConfigHandlers(deps: Deps): RuntimeHandlers {
  return {
    RuntimeConfig: () => ({ linux: { cgroup_driver: deps.config.cgroup_driver === 'systemd' ? 'SYSTEMD' : 'CGROUPFS' } }),
    UpdateRuntimeConfig: (request) => {
      const podCidr = request.runtime_config?.network_config?.pod_cidr ?? '';
      // An empty CIDR is kubelet saying it has none yet; keep what we had.
      if (podCidr) {
        const joined = parsePodCidrs(podCidr).join(',');
        deps.store.setMeta('pod_cidr', joined);
        deps.cni.setPodCidr(joined);
        deps.log.info({ podCidr: joined }, 'pod CIDR updated');
      }
      return {};
    },
  };
}
