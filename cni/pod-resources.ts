// A client of kubelet's pod-resources API (v1.PodResourcesLister on a unix socket): which device ids of
// which resource kubelet allocated to a pod (device plugins), and which devices of which ResourceClaims
// (DRA, `dynamic_resources`). Only pods whose networks are device-backed ask it, so the proto is loaded and
// the socket dialled on first use.
import { stat } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { Unavailable } from '../core/errors.js';

const DEFAULT_POD_RESOURCES_SOCKET = '/var/lib/kubelet/pod-resources/kubelet.sock';
const PROTO_PATH = fileURLToPath(new URL('../../proto/podresources/v1/api.proto', import.meta.url));
const DEFAULT_TIMEOUT_MS = 10_000;

/** Device ids per resource name, over all of a pod's containers, in kubelet's order. */
export type PodDevices = Map<string, string[]>;

/** One device DRA allocated: the driver/pool/device triplet and the CDI devices it brings. */
export interface DraDevice {
  driver: string;
  pool: string;
  device: string;
  cdiDevices: string[];
}

/** A ResourceClaim the pod's containers use, as kubelet reports it (no devices: not prepared for the pod). */
export interface DraClaim {
  namespace: string;
  name: string;
  devices: DraDevice[];
}

/** Everything kubelet allocated to a pod, over all of its containers, each once, in kubelet's order. */
export interface PodAllocations {
  devices: PodDevices;
  claims: DraClaim[];
}

/** Where a pod's allocated devices come from (kubelet; a fake in unit tests). */
export interface PodDeviceSource {
  podAllocations(namespace: string, name: string): Promise<PodAllocations>;
}

export interface PodResources {
  name: string;
  namespace: string;
  containers: {
    name?: string;
    devices: { resource_name: string; device_ids: string[] }[];
    dynamic_resources?: {
      claim_name: string;
      claim_namespace: string;
      claim_resources: { cdi_devices: { name: string }[]; driver_name: string; pool_name: string; device_name: string }[];
    }[];
  }[];
}

type Unary<Req, Res> = (req: Req, opts: { deadline: number }, cb: (err: grpc.ServiceError | null, res?: Res) => void) => void;
interface ListerClient extends grpc.Client {
  Get: Unary<{ pod_name: string; pod_namespace: string }, { pod_resources: PodResources | null }>;
  List: Unary<Record<string, never>, { pod_resources: PodResources[] }>;
}

let listerCtor: (new (address: string, creds: grpc.ChannelCredentials) => ListerClient) | undefined;

function lister(): new (address: string, creds: grpc.ChannelCredentials) => ListerClient {
  if (!listerCtor) {
    const definition = protoLoader.loadSync(PROTO_PATH, { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
    const pkg = grpc.loadPackageDefinition(definition) as unknown as { v1: { PodResourcesLister: typeof listerCtor } };
    listerCtor = pkg.v1.PodResourcesLister;
  }
  return listerCtor!;
}

/**
 * The allocations of one pod from its PodResources (empty when kubelet allocated none). A claim shared by
 * several containers is reported by each: it is listed once, with each of its devices once.
 */
export function allocationsOf(pod: PodResources | null | undefined): PodAllocations {
  const devices: PodDevices = new Map();
  const claims: DraClaim[] = [];
  for (const container of pod?.containers ?? []) {
    for (const d of container.devices ?? []) {
      const ids = devices.get(d.resource_name) ?? [];
      for (const id of d.device_ids ?? []) if (!ids.includes(id)) ids.push(id);
      devices.set(d.resource_name, ids);
    }
    for (const r of container.dynamic_resources ?? []) {
      let claim = claims.find((c) => c.namespace === r.claim_namespace && c.name === r.claim_name);
      if (!claim) claims.push(claim = { namespace: r.claim_namespace, name: r.claim_name, devices: [] });
      for (const cr of r.claim_resources ?? []) {
        const known = claim.devices.find((d) => d.driver === cr.driver_name && d.pool === cr.pool_name && d.device === cr.device_name);
        const cdi = (cr.cdi_devices ?? []).map((c) => c.name);
        if (known) known.cdiDevices.push(...cdi.filter((n) => !known.cdiDevices.includes(n)));
        else claim.devices.push({ driver: cr.driver_name, pool: cr.pool_name, device: cr.device_name, cdiDevices: [...new Set(cdi)] });
      }
    }
  }
  return { devices, claims };
}

export class PodResourcesClient implements PodDeviceSource {
  constructor(
    readonly socketPath: string = DEFAULT_POD_RESOURCES_SOCKET,
    private readonly timeoutMs = DEFAULT_TIMEOUT_MS,
  ) {}

  /** Get for the pod; List when this kubelet has no Get (older, or the feature gate off) or does not know the pod by Get. */
  async podAllocations(namespace: string, name: string): Promise<PodAllocations> {
    try {
      await stat(this.socketPath);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw new Unavailable(
        `kubelet pod-resources socket ${this.socketPath} is not there (${code}): pod ${namespace}/${name} needs a device from kubelet; ` +
          'is kubelet running?',
      );
    }
    const Ctor = lister();
    const client = new Ctor(`unix:${this.socketPath}`, grpc.credentials.createInsecure());
    try {
      try {
        const res = await this.call(client.Get.bind(client), { pod_name: name, pod_namespace: namespace });
        return allocationsOf(res.pod_resources);
      } catch (err) {
        if (this.unreachable(err)) throw this.unavailable(err, namespace, name);
      }
      try {
        const res = await this.call(client.List.bind(client), {});
        return allocationsOf(res.pod_resources.find((p) => p.name === name && p.namespace === namespace));
      } catch (err) {
        throw this.unavailable(err, namespace, name);
      }
    } finally {
      client.close();
    }
  }

  private call<Req, Res>(fn: Unary<Req, Res>, req: Req): Promise<Res> {
    return new Promise((resolve, reject) => {
      fn(req, { deadline: Date.now() + this.timeoutMs }, (err, res) => (err ? reject(err) : resolve(res!)));
    });
  }

  private unreachable(err: unknown): boolean {
    const code = (err as grpc.ServiceError).code;
    return code === grpc.status.UNAVAILABLE || code === grpc.status.DEADLINE_EXCEEDED;
  }

  private unavailable(err: unknown, namespace: string, name: string): Unavailable {
    const reason = (err as Error).message;
    const message = `kubelet pod-resources API at ${this.socketPath} did not answer for pod ${namespace}/${name}: ${reason}`;
    return new Unavailable(message, { cause: err });
  }
}
