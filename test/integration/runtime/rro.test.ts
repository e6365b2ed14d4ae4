// Runtime handler features through the real daemon: Status lists each handler with what this node
// supports, and a recursive read-only mount keeps a submount read-only too, which plain read-only does not.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { execa } from 'execa';
import { ContainerEnv } from '../container/env.js';

function grpcCode(code: grpc.status, details?: RegExp) {
  return (err: grpc.ServiceError) => {
    assert.equal(err.code, code, `expected ${grpc.status[code]}, got ${grpc.status[err.code]}: ${err.details}`);
    if (details) assert.match(err.details, details);
    return true;
  };
}

/** A host dir holding a file and a tmpfs submount `sub`; unmounted and removed when the test ends. */
async function dirWithSubmount(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'minicri-rro-'));
  t.after(async () => {
    await execa('umount', ['-R', join(dir, 'sub')], { reject: false });
    await rm(dir, { recursive: true, force: true });
  });
  await mkdir(join(dir, 'sub'));
  await execa('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', join(dir, 'sub')]);
  await writeFile(join(dir, 'top'), 'top\n');
  return dir;
}

describe('runtime handler features and recursive read-only mounts', () => {
  let env: ContainerEnv;
  before(async () => { env = await ContainerEnv.start(116); });
  after(() => env.stop());

  it('Status lists the default handler under the empty name and its own, with the features runc 1.1 and this kernel have', async () => {
    const r = await env.rt.runtime.call('Status', { verbose: true });
    const handlers = r.runtime_handlers.map((h) => [h.name, h.features?.recursive_read_only_mounts, h.features?.user_namespaces]);
    assert.deepEqual(handlers, [['', true, true], ['runc', true, true]], `features: ${r.info.runtimeHandlerFeatures}`);
    assert.equal(r.features?.supplemental_groups_policy, true);
    assert.equal(r.features?.user_namespaces_host_network, false);
    assert.deepEqual(JSON.parse(r.info.runtimeHandlerFeatures!).runc.missing, []);
  });

  it('makes a submount of a recursive read-only mount read-only, where plain read-only leaves it writable', async (t) => {
    const dir = await dirWithSubmount(t);
    const pod = await env.runPod(t, 'rro');
    const script = 'cat /r/top; touch /r/new 2>/dev/null && echo top-writable || echo top-refused; touch /r/sub/new 2>/dev/null && echo sub-writable || echo sub-refused';
    const rro = await env.output(pod, 'rro', script, (c) => {
      c.mounts = [{ container_path: '/r', host_path: dir, readonly: true, recursive_read_only: true, propagation: 'PROPAGATION_PRIVATE' }];
    });
    assert.deepEqual(rro.split('\n'), ['top', 'top-refused', 'sub-refused']);
    const plain = await env.output(pod, 'plain-ro', script, (c) => {
      c.mounts = [{ container_path: '/r', host_path: dir, readonly: true, propagation: 'PROPAGATION_PRIVATE' }];
    });
    assert.deepEqual(plain.split('\n'), ['top', 'top-refused', 'sub-writable'], 'without rro the submount stays writable (the test would prove nothing otherwise)');
  });

  it('refuses recursive read-only without readonly or with propagation, and leaves no container behind', async (t) => {
    const dir = await dirWithSubmount(t);
    const pod = await env.runPod(t, 'rro-bad');
    const create = (name: string, mount: object) => env.create(pod, name, ['true'], (c) => {
      c.mounts = [{ container_path: '/r', host_path: dir, recursive_read_only: true, ...mount }];
    });
    await assert.rejects(create('rw', { readonly: false, propagation: 'PROPAGATION_PRIVATE' }),
      grpcCode(grpc.status.INVALID_ARGUMENT, /"\/r".*not read-only/));
    await assert.rejects(create('slave', { readonly: true, propagation: 'PROPAGATION_HOST_TO_CONTAINER' }),
      grpcCode(grpc.status.INVALID_ARGUMENT, /"\/r".*private propagation/));
    const left = await env.rt.runtime.call('ListContainers', { filter: { pod_sandbox_id: pod.id } });
    assert.deepEqual(left.containers, []);
    assert.deepEqual((await env.runcList()).filter((id) => id !== pod.id), []);
  });
});
