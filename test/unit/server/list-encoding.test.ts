import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { listSerializer, summaryCache, withListSerializers } from '../../../server/list-encoding.js';
import { loadCri } from '../../../server/proto.js';

const cri = loadCri();
// The generated method types are narrower than the plain objects handlers return; the wire is what matters here.
const serializerOf = (name: 'ListContainers' | 'ListPodSandbox') => cri.RuntimeService.service[name].responseSerialize as (value: unknown) => Buffer;
const container = (i: number, state = 'CONTAINER_RUNNING') => ({
  id: `c${i}`, pod_sandbox_id: `p${i}`, metadata: { name: `app${i}`, attempt: i }, image: { image: 'busybox', user_specified_image: 'busybox' },
  image_ref: 'sha256:ab', image_id: 'sha256:ab', state, created_at: String(1_700_000_000_000_000_000n + BigInt(i)), labels: { a: String(i) }, annotations: { b: 'x' },
});

describe('list encoding', () => {
  it('encodes a list as the concatenation of its items, byte for byte what the whole message gives', () => {
    const response = { containers: [container(1), container(2, 'CONTAINER_EXITED'), container(3)] };
    const bytes = withListSerializers(cri.RuntimeService.service).ListContainers!.responseSerialize(response);
    assert.deepEqual(bytes, serializerOf('ListContainers')(response));
    const back = cri.RuntimeService.service.ListContainers.responseDeserialize(bytes);
    assert.deepEqual(back.containers.map((c) => [c.id, c.state, c.created_at, c.labels.a]), [
      ['c1', 'CONTAINER_RUNNING', '1700000000000000001', '1'], ['c2', 'CONTAINER_EXITED', '1700000000000000002', '2'], ['c3', 'CONTAINER_RUNNING', '1700000000000000003', '3'],
    ]);
    assert.deepEqual(withListSerializers(cri.RuntimeService.service).ListContainers!.responseSerialize({ containers: [] }).length, 0);
    const sandboxes = { items: [{ id: 's1', metadata: { name: 'web', uid: 'u', namespace: 'n', attempt: 0 }, state: 'SANDBOX_READY', created_at: '5', labels: {}, annotations: {}, runtime_handler: 'runc' }] };
    assert.deepEqual(withListSerializers(cri.RuntimeService.service).ListPodSandbox!.responseSerialize(sandboxes), serializerOf('ListPodSandbox')(sandboxes));
  });

  it('encodes each item object once', () => {
    let calls = 0;
    const serialize = listSerializer((v) => { calls++; return serializerOf('ListContainers')(v); }, 'containers');
    const a = container(1);
    const b = container(2);
    serialize({ containers: [a, b] });
    serialize({ containers: [b, a] });
    assert.equal(calls, 2);
    serialize({ containers: [container(1)] }); // an equal but new object is encoded anew
    assert.equal(calls, 3);
  });

  it('keeps one summary per id and version, and forgets ids no longer listed', () => {
    let made = 0;
    const cache = summaryCache((r: { id: string; state: string }) => ({ made: ++made, state: r.state }), (r) => r.state);
    const first = cache.get({ id: 'x', state: 'RUNNING' });
    assert.equal(cache.get({ id: 'x', state: 'RUNNING' }), first);
    const exited = cache.get({ id: 'x', state: 'EXITED' });
    assert.notEqual(exited, first);
    assert.equal(exited.state, 'EXITED');
    cache.get({ id: 'y', state: 'RUNNING' });
    cache.keepOnly([{ id: 'y', state: 'RUNNING' }]);
    assert.notEqual(cache.get({ id: 'x', state: 'EXITED' }), exited, 'x was forgotten');
    assert.equal(made, 4);
  });
});
