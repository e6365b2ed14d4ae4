// A stand-in for kubelet's pod-resources API: a grpc-js server on a temp unix socket speaking the real
// v1.PodResourcesLister proto, reporting the devices a test gives it: device-plugin resources, and DRA
// claims in `dynamic_resources` of the containers that list them. `withGet: false` leaves Get
// unimplemented, as an older kubelet (or one with the feature gate off) does.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const PROTO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../proto/podresources/v1/api.proto');

/** One device of a claim, as kubelet reports it (ClaimResource). */
export interface FakeClaimDevice {
  driver: string;
  pool: string;
  device: string;
  cdiDevices: string[];
}

/** A ResourceClaim of the pod and the containers that list it in resources.claims (default: the first). */
export interface FakeClaim {
  name: string;
  namespace?: string;
  devices: FakeClaimDevice[];
  containers?: string[];
}

export interface FakePod {
  namespace: string;
  name: string;
  /** resource name → device ids, all in the first container ("app"). */
  devices: Record<string, string[]>;
  claims?: FakeClaim[];
  /** The pod's containers; default one, "app". */
  containers?: string[];
}

export interface PodResourcesServer {
  socket: string;
  calls: string[];
  close(): Promise<void>;
}

export async function startPodResourcesServer(pods: FakePod[], opts: { withGet?: boolean } = {}): Promise<PodResourcesServer> {
  const dir = await mkdtemp(path.join(tmpdir(), 'mcnt-podres-'));
  const socket = path.join(dir, 'kubelet.sock');
  const def = protoLoader.loadSync(PROTO, { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
  const service = (grpc.loadPackageDefinition(def) as unknown as { v1: { PodResourcesLister: { service: grpc.ServiceDefinition } } }).v1.PodResourcesLister.service;
  const calls: string[] = [];
  const resources = (p: FakePod) => {
    const names = p.containers ?? ['app'];
    return {
      name: p.name,
      namespace: p.namespace,
      containers: names.map((name, i) => ({
        name,
        devices: i === 0 ? Object.entries(p.devices).map(([resource_name, device_ids]) => ({ resource_name, device_ids })) : [],
        dynamic_resources: (p.claims ?? []).filter((c) => (c.containers ?? [names[0]]).includes(name)).map((c) => ({
          claim_name: c.name,
          claim_namespace: c.namespace ?? p.namespace,
          claim_resources: c.devices.map((d) => ({
            driver_name: d.driver, pool_name: d.pool, device_name: d.device, cdi_devices: d.cdiDevices.map((n) => ({ name: n })),
          })),
        })),
      })),
    };
  };
  const impl: grpc.UntypedServiceImplementation = {
    List: (_call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) => {
      calls.push('List');
      cb(null, { pod_resources: pods.map(resources) });
    },
  };
  if (opts.withGet !== false) {
    impl.Get = (call: grpc.ServerUnaryCall<{ pod_name: string; pod_namespace: string }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
      calls.push(`Get ${call.request.pod_namespace}/${call.request.pod_name}`);
      const pod = pods.find((p) => p.name === call.request.pod_name && p.namespace === call.request.pod_namespace);
      if (!pod) cb({ code: grpc.status.UNKNOWN, details: `pod ${call.request.pod_name} not found` });
      else cb(null, { pod_resources: resources(pod) });
    };
  }
  const server = new grpc.Server();
  server.addService(service, impl);
  await new Promise<void>((resolve, reject) => server.bindAsync(`unix:${socket}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
  return {
    socket,
    calls,
    async close() {
      await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}
