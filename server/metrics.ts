// Optional Prometheus endpoint (config `metrics_address`, off by default): what the store says is pending
// (failed CNI teardowns, removals), sandboxes and containers by state, per-RPC outcomes, and how long each
// step of starting a pod or a container took (the timelines the records keep). prom-client is
// loaded only when the endpoint is on, so a daemon without metrics does not carry it.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { claimSocketPath, listenUnixSocket } from './listen.js';
import type { Logger } from '../core/log.js';
import type { TimelineEntry } from '../core/timeline.js';
import type { Tables } from '../pod/records.js';
import type { RpcObserver } from './rpc.js';

export interface Metrics {
  observe: RpcObserver;
  /** Where it listens: "host:port" or the socket path. */
  address: string;
  stop(): Promise<void>;
}

/** Where a `metrics_address` listens: an absolute path is a unix socket, else loopback "host:port". */
export function listenTarget(address: string): { path: string } | { host: string; port: number } {
  if (address.startsWith('/')) return { path: address };
  const i = address.lastIndexOf(':');
  return { host: address.slice(0, i).replace(/^\[(.*)\]$/, '$1'), port: Number(address.slice(i + 1)) };
}

/** What the image service counts of its pulls (Images.stats). */
export interface PullStats { bytes: number; inFlight: number }

/** The registry with minicri's metrics, read from `tables` (and the pull counts) at each scrape. */
async function buildRegistry(tables: Tables, pulls?: PullStats): Promise<{ registry: Registry; observe: RpcObserver }> {
  // Its CommonJS exports as `default`: what both Node and the bundle (scripts/bundle.mjs) give an import() of it.
  const { default: prom } = await import('prom-client');
  const registry = new prom.Registry();
  prom.collectDefaultMetrics({ register: registry, prefix: 'minicri_' });
  new prom.Gauge({
    name: 'minicri_pending_cni_teardowns', help: 'Pod network teardowns (CNI DEL) that failed and are being retried',
    registers: [registry], collect() { this.set(tables.teardowns.list().length); },
  });
  new prom.Gauge({
    name: 'minicri_pending_removals', help: 'Sandbox and container removals that failed or were cut off and are being retried',
    labelNames: ['kind'], registers: [registry],
    collect() {
      this.set({ kind: 'sandbox' }, tables.sandboxes.list().filter((r) => r.removing).length);
      this.set({ kind: 'container' }, tables.containers.list().filter((r) => r.removing).length);
      // A removed container's release of its host objects, run right after its RemoveContainer or retried.
      this.set({ kind: 'container-cleanup' }, tables.containerCleanups.list().length);
    },
  });
  new prom.Gauge({
    name: 'minicri_sandboxes', help: 'Pod sandboxes by state', labelNames: ['state'], registers: [registry],
    collect() { setByState(this, tables.sandboxes.list(), ['SANDBOX_READY', 'SANDBOX_NOTREADY']); },
  });
  new prom.Gauge({
    name: 'minicri_containers', help: 'Containers by state', labelNames: ['state'], registers: [registry],
    collect() {
      setByState(this, tables.containers.list(), ['CONTAINER_CREATED', 'CONTAINER_RUNNING', 'CONTAINER_EXITED', 'CONTAINER_UNKNOWN']);
    },
  });
  const steps = new prom.Histogram({
    name: 'minicri_pod_start_step_seconds',
    help: 'How long each step of starting a sandbox or a container took (plugin: the CNI plugin of a cni-add step)',
    labelNames: ['kind', 'step', 'plugin'], buckets: STEP_BUCKETS, registers: [registry],
  });
  observeTimelines(tables.sandboxes, (e) => steps.observe({ kind: 'sandbox', step: e.step, plugin: e.plugin ?? '' }, e.ms / 1000));
  observeTimelines(tables.containers, (e) => steps.observe({ kind: 'container', step: e.step, plugin: e.plugin ?? '' }, e.ms / 1000));
  if (pulls) {
    new prom.Counter({
      name: 'minicri_image_pull_bytes_total', help: 'Image layer and config bytes received from registries and mirrors',
      registers: [registry], collect() { this.reset(); this.inc(pulls.bytes); },
    });
    new prom.Gauge({
      name: 'minicri_image_pulls_in_flight', help: 'Image pulls running now',
      registers: [registry], collect() { this.set(pulls.inFlight); },
    });
  }
  const calls = new prom.Counter({
    name: 'minicri_rpc_calls_total', help: 'CRI calls by method and gRPC status', labelNames: ['rpc', 'code'], registers: [registry],
  });
  return { registry, observe: (rpc, code) => calls.inc({ rpc, code }) };
}

/** From a millisecond (a plugin ADD) to the CNI plugin timeout's order. */
const STEP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

interface TimelineTable {
  list(): { id: string; timeline?: TimelineEntry[] }[];
  get(id: string): { timeline?: TimelineEntry[] } | undefined;
  onChange(listener: (id: string) => void): void;
}

/**
 * Calls `observe` once for each step a record's timeline gains from now on. The timelines of records made
 * before the endpoint started (kept across a restart) were counted by the process that made them.
 */
function observeTimelines(table: TimelineTable, observe: (e: TimelineEntry) => void): void {
  const seen = new Map(table.list().map((r) => [r.id, r.timeline?.length ?? 0]));
  table.onChange((id) => {
    const timeline = table.get(id)?.timeline;
    if (!timeline) {
      if (!table.get(id)) seen.delete(id);
      return;
    }
    for (const entry of timeline.slice(seen.get(id) ?? 0)) observe(entry);
    seen.set(id, timeline.length);
  });
}

/** Every state gets a sample, zero included, so a series does not vanish when its last object goes. */
function setByState(gauge: { set(labels: { state: string }, value: number): void }, records: { state: string }[], states: string[]): void {
  for (const state of states) gauge.set({ state }, records.filter((r) => r.state === state).length);
}

/** Serves GET /metrics on `address`; fails (naming the address) when it cannot listen. */
export async function startMetrics(address: string, tables: Tables, log: Logger, pulls?: PullStats): Promise<Metrics> {
  const { registry, observe } = await buildRegistry(tables, pulls);
  const server: Server = createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '/').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('minicri serves metrics at /metrics\n');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (err: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`${err.message}\n`),
    );
  });
  const target = listenTarget(address);
  if ('path' in target) await claimSocketPath(target.path);
  const unix = await ('path' in target ? listenUnixSocket(server, target.path) : new Promise<undefined>((resolve, reject) => {
    server.once('error', reject);
    server.listen(target, () => { server.off('error', reject); resolve(undefined); });
  })).catch((err: Error) => { throw new Error(`cannot serve metrics on ${address}: ${err.message}`); });
  const where = 'path' in target ? target.path : `${target.host}:${(server.address() as AddressInfo).port}`;
  log.info({ address: where }, 'metrics endpoint listening');
  return {
    observe,
    address: where,
    stop: async () => {
      server.closeAllConnections();
      await (unix ? unix.close() : new Promise<void>((resolve) => server.close(() => resolve())));
    },
  };
}
