import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { parseConfig } from '../../../server/config.js';
import { NotFound } from '../../../core/errors.js';
import { silentLogger } from '../../../core/log.js';
import { listenTarget, startMetrics } from '../../../server/metrics.js';
import { openTables, type ContainerRecord, type SandboxRecord } from '../../../pod/records.js';
import { bindService } from '../../../server/service.js';
import { Store } from '../../../store/store.js';

/** GET over a unix socket: status and body. */
function get(socketPath: string, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    request({ socketPath, path }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => { body += c.toString(); });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    }).on('error', reject).end();
  });
}

describe('metrics', () => {
  it('is off by default and accepts only loopback ports or a unix socket', () => {
    assert.equal(parseConfig({}).metrics_address, '');
    for (const ok of ['127.0.0.1:9110', 'localhost:9110', '[::1]:9110', '/run/minicri/metrics.sock']) assert.equal(parseConfig({ metrics_address: ok }).metrics_address, ok);
    for (const bad of ['0.0.0.0:9110', '10.0.0.1:9110', ':9110', '127.0.0.1:70000', 'metrics.sock', '127.0.0.1']) {
      assert.throws(() => parseConfig({ metrics_address: bad }), /config key "metrics_address": must be empty \(off\), an absolute unix socket path, or a loopback/);
    }
    assert.deepEqual(listenTarget('[::1]:9110'), { host: '::1', port: 9110 });
    assert.deepEqual(listenTarget('/run/m.sock'), { path: '/run/m.sock' });
  });

  it('counts each call by method and status where calls end, and needs no observer', async () => {
    const definition = { Version: { responseStream: false }, Gone: { responseStream: false } } as unknown as grpc.ServiceDefinition;
    const handlers = { Version: async () => ({ version: '1' }), Gone: () => { throw new NotFound('gone'); } };
    const call = (service: grpc.UntypedServiceImplementation, name: string) => new Promise<{ err: grpc.ServiceError | null; value: unknown }>((resolve) => {
      (service[name] as grpc.handleUnaryCall<unknown, unknown>)({ request: {} } as never, (err, value) => resolve({ err: err as grpc.ServiceError | null, value }));
    });
    const seen: string[] = [];
    const observed = bindService('test.Service', definition, handlers, silentLogger, (rpc, code) => seen.push(`${rpc} ${code}`));
    assert.deepEqual((await call(observed, 'Version')).value, { version: '1' });
    assert.match((await call(observed, 'Gone')).err?.message ?? '', /gone/);
    assert.deepEqual(seen, ['Version OK', 'Gone NOT_FOUND']);
    const plain = bindService('test.Service', definition, handlers, silentLogger);
    assert.deepEqual((await call(plain, 'Version')).value, { version: '1' });
    assert.equal((await call(plain, 'Gone')).err?.code, grpc.status.NOT_FOUND);
  });

  it('serves pending teardowns, removals and objects by state from the store at each scrape', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'minicri-metrics-'));
    const store = Store.open(join(dir, 'minicri.db'));
    const tables = openTables(store);
    const metrics = await startMetrics(join(dir, 'metrics.sock'), tables, silentLogger);
    t.after(async () => { await metrics.stop(); store.close(); rmSync(dir, { recursive: true, force: true }); });
    const sandbox = { id: 'a'.repeat(64), state: 'SANDBOX_NOTREADY', config: { metadata: { name: 'p', namespace: 'n', uid: 'u', attempt: 0 } } } as unknown as SandboxRecord;
    tables.sandboxes.put({ ...sandbox, removing: { attempts: 1, nextAt: 0, lastError: 'busy' } });
    tables.teardowns.put({ id: sandbox.id, request: {} as never, attempts: 2, lastError: 'DEL failed', nextAt: 0 });
    metrics.observe('RunPodSandbox', 'UNKNOWN');

    const { status, body } = await get(metrics.address, '/metrics');
    assert.equal(status, 200);
    assert.match(body, /^minicri_pending_cni_teardowns 1$/m);
    assert.match(body, /^minicri_pending_removals\{kind="sandbox"\} 1$/m);
    assert.match(body, /^minicri_sandboxes\{state="SANDBOX_NOTREADY"\} 1$/m);
    assert.match(body, /^minicri_containers\{state="CONTAINER_RUNNING"\} 0$/m);
    assert.match(body, /^minicri_rpc_calls_total\{rpc="RunPodSandbox",code="UNKNOWN"\} 1$/m);
    assert.match(body, /^minicri_process_resident_memory_bytes \d+/m);
    assert.equal((await get(metrics.address, '/')).status, 404);
  });

  it('observes each step a sandbox or container timeline gains once, in the start-step histogram', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'minicri-metrics-'));
    const store = Store.open(join(dir, 'minicri.db'));
    const tables = openTables(store);
    const meta = { metadata: { name: 'p', namespace: 'n', uid: 'u', attempt: 0 } };
    // Made before the endpoint started (as after a restart): its steps were counted by the process that made it.
    tables.sandboxes.put({ id: 'b'.repeat(64), state: 'SANDBOX_READY', config: { metadata: { ...meta.metadata, attempt: 1 } }, timeline: [{ step: 'netns', ms: 5 }] } as unknown as SandboxRecord);
    const metrics = await startMetrics(join(dir, 'metrics.sock'), tables, silentLogger);
    t.after(async () => { await metrics.stop(); store.close(); rmSync(dir, { recursive: true, force: true }); });
    const sandbox = { id: 'a'.repeat(64), state: 'SANDBOX_NOTREADY', config: meta } as unknown as SandboxRecord;
    tables.sandboxes.put(sandbox);
    const timeline = [{ step: 'netns', ms: 3 }, { step: 'cni-add', plugin: 'bridge', network: 'pods', ms: 40 }, { step: 'pause-start', ms: 20 }];
    tables.sandboxes.put({ ...sandbox, state: 'SANDBOX_READY', timeline });
    tables.sandboxes.put({ ...sandbox, state: 'SANDBOX_READY', timeline }); // written again: nothing new
    const container = { id: 'c'.repeat(64), sandboxId: sandbox.id, state: 'CONTAINER_CREATED', config: { metadata: { name: 'app', attempt: 0 } } } as unknown as ContainerRecord;
    tables.containers.put({ ...container, timeline: [{ step: 'runc-create', ms: 30 }] });
    tables.containers.put({ ...container, state: 'CONTAINER_RUNNING', timeline: [{ step: 'runc-create', ms: 30 }, { step: 'runc-start', ms: 8 }] });

    const { body } = await get(metrics.address, '/metrics');
    assert.match(body, /^# TYPE minicri_pod_start_step_seconds histogram$/m);
    assert.match(body, /^minicri_pod_start_step_seconds_count\{kind="sandbox",step="netns",plugin=""\} 1$/m);
    assert.match(body, /^minicri_pod_start_step_seconds_sum\{kind="sandbox",step="cni-add",plugin="bridge"\} 0\.04$/m);
    assert.match(body, /^minicri_pod_start_step_seconds_bucket\{le="0\.05",kind="sandbox",step="cni-add",plugin="bridge"\} 1$/m);
    assert.match(body, /^minicri_pod_start_step_seconds_bucket\{le="0\.025",kind="sandbox",step="cni-add",plugin="bridge"\} 0$/m);
    assert.match(body, /^minicri_pod_start_step_seconds_count\{kind="container",step="runc-create",plugin=""\} 1$/m);
    assert.match(body, /^minicri_pod_start_step_seconds_count\{kind="container",step="runc-start",plugin=""\} 1$/m);
  });
});
