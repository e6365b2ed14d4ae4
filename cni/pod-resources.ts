// A client of kubelet's pod-resources API (v1.PodResourcesLister on a unix socket): which device ids of
// which resource kubelet allocated to a pod. Only pods whose networks are device-backed ask it, so the
// proto is loaded and the socket dialled on first use.
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

/** Where a pod's allocated devices come from (kubelet; a fake in unit tests). */
export interface PodDeviceSource {
  podDevices(namespace: string, name: string): Promise<PodDevices>;
}

interface PodResources {
  name: string;
  namespace: string;
  containers: { devices: { resource_name: string; device_ids: string[] }[] }[];
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

/** The devices of one pod from its PodResources (empty when kubelet allocated none). */
function devicesOf(pod: PodResources | null | undefined): PodDevices {
  const out: PodDevices = new Map();
  for (const container of pod?.containers ?? []) {
    for (const d of container.devices ?? []) {
      const ids = out.get(d.resource_name) ?? [];
      for (const id of d.device_ids ?? []) if (!ids.includes(id)) ids.push(id);
      out.set(d.resource_name, ids);
    }
  }
  return out;
}

export class PodResourcesClient implements PodDeviceSource {
  constructor(
    readonly socketPath: string = DEFAULT_POD_RESOURCES_SOCKET,
    private readonly timeoutMs = DEFAULT_TIMEOUT_MS,
  ) {}

  /** Get for the pod; List when this kubelet has no Get (older, or the feature gate off) or does not know the pod by Get. */
  async podDevices(namespace: string, name: string): Promise<PodDevices> {
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
        return devicesOf(res.pod_resources);
      } catch (err) {
        if (this.unreachable(err)) throw this.unavailable(err, namespace, name);
      }
      try {
        const res = await this.call(client.List.bind(client), {});
        return devicesOf(res.pod_resources.find((p) => p.name === name && p.namespace === namespace));
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
