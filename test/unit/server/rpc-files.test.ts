// A newcomer finds every RPC's handler by the RPC's name: server/handlers/<rpc-name>.ts exports a function
// named after the RPC, and every handler file is an RPC of the CRI services that the daemon registers.
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Edge } from '../../../server/edge.js';
import { imageService } from '../../../server/image-service.js';
import { loadCri } from '../../../server/proto.js';
import { runtimeService } from '../../../server/runtime-service.js';
import { fakePods } from '../../support/fake-pods.js';

/** The handlers folder of the source tree (this file runs from dist/test/unit/server/). */
const HANDLERS = fileURLToPath(new URL('../../../../server/handlers/', import.meta.url));

const fileOf = (rpc: string) => `${rpc.replace(/([a-z0-9])([A-Z])/g, '$1-$2').toLowerCase()}.ts`;

describe('one file per RPC', () => {
  it('each registered handler lives in server/handlers/<its RPC name>.ts, and each such file is registered', async () => {
    const pods = fakePods();
    try {
      const edge = {
        config: { runtimes: { runc: { path: 'runc' } }, default_runtime: 'runc', conmon_path: 'conmon', cgroup_driver: 'cgroupfs' },
        pods: pods.ctx, lists: { containers: {}, sandboxes: {} },
      } as unknown as Edge;
      const cri = loadCri();
      const services = { RuntimeService: runtimeService(edge), ImageService: imageService(edge) };
      const registered: string[] = [];
      for (const [service, handlers] of Object.entries(services)) {
        const methods = Object.keys(cri[service as keyof typeof services].service);
        for (const rpc of Object.keys(handlers)) {
          assert.ok(methods.includes(rpc), `${rpc} is not a method of runtime.v1.${service}`);
          assert.ok(existsSync(`${HANDLERS}${fileOf(rpc)}`), `${rpc}'s handler should be server/handlers/${fileOf(rpc)}`);
          const module = await import(`../../../server/handlers/${fileOf(rpc).replace(/\.ts$/, '.js')}`) as Record<string, unknown>;
          assert.equal(typeof module[rpc], 'function', `server/handlers/${fileOf(rpc)} should export ${rpc}`);
          registered.push(fileOf(rpc));
        }
      }
      assert.deepEqual(readdirSync(HANDLERS).sort(), registered.sort(), 'a file in server/handlers/ that no service registers');
      assert.ok(registered.length >= 30, `only ${registered.length} RPCs registered`);
    } finally {
      pods.close();
    }
  });
});
