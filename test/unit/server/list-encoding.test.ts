import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { ListContainers } from '../../../server/handlers/list-containers.js';
import type { Edge } from '../../../server/edge.js';
import { ListEncoder, listEncoders, listedSummaries, withListEncoders } from '../../../server/list-encoding.js';
import { silentLogger } from '../../../core/log.js';
import { loadCri } from '../../../server/proto.js';
import { openTables, type ContainerRecord } from '../../../pod/records.js';
import { markNeverStarted } from '../../../pod/state.js';
import { Store } from '../../../store/store.js';

const cri = loadCri();
// The generated method types are narrower than the plain objects handlers return; the wire is what matters here.
const serializerOf = (name: 'ListContainers' | 'ListPodSandbox') => cri.RuntimeService.service[name].responseSerialize as (value: unknown) => Buffer;
const container = (i: number, state = 'CONTAINER_RUNNING') => ({
  id: `c${i}`, pod_sandbox_id: `p${i}`, metadata: { name: `app${i}`, attempt: i }, image: { image: 'busybox', user_specified_image: 'busybox' },
  image_ref: 'sha256:ab', image_id: 'sha256:ab', state, created_at: String(1_700_000_000_000_000_000n + BigInt(i)), labels: { a: String(i) }, annotations: { b: 'x' },
});
type Item = ReturnType<typeof container>;

/** A serializer for ListContainers that counts its calls. */
function countingEncoder() {
  const counter = { calls: 0 };
  const encoder = new ListEncoder((v) => { counter.calls++; return serializerOf('ListContainers')(v); }, 'containers');
  return { encoder, counter };
}

/** What listedSummaries needs of a RecordTable, in memory. */
function fakeTable(initial: Item[] = []) {
  const rows = new Map(initial.map((r) => [r.id, r]));
  const listeners: ((id: string) => void)[] = [];
  return {
    get: (id: string) => rows.get(id),
    list: () => [...rows.values()],
    onChange: (l: (id: string) => void) => { listeners.push(l); },
    put(r: Item) { rows.set(r.id, r); listeners.forEach((l) => l(r.id)); },
    delete(id: string) { rows.delete(id); listeners.forEach((l) => l(id)); },
  };
}

describe('list encoding', () => {
  it('encodes a list as the concatenation of its items, byte for byte what the whole message gives', () => {
    const service = withListEncoders(cri.RuntimeService.service, listEncoders(cri.RuntimeService.service));
    const response = { containers: [container(1), container(2, 'CONTAINER_EXITED'), container(3)] };
    const bytes = service.ListContainers!.responseSerialize(response);
    assert.deepEqual(bytes, serializerOf('ListContainers')(response));
    const back = cri.RuntimeService.service.ListContainers.responseDeserialize(bytes);
    assert.deepEqual(back.containers.map((c) => [c.id, c.state, c.created_at, c.labels.a]), [
      ['c1', 'CONTAINER_RUNNING', '1700000000000000001', '1'], ['c2', 'CONTAINER_EXITED', '1700000000000000002', '2'], ['c3', 'CONTAINER_RUNNING', '1700000000000000003', '3'],
    ]);
    assert.equal(service.ListContainers!.responseSerialize({ containers: [] }).length, 0);
    const sandboxes = { items: [{ id: 's1', metadata: { name: 'web', uid: 'u', namespace: 'n', attempt: 0 }, state: 'SANDBOX_READY', created_at: '5', labels: {}, annotations: {}, runtime_handler: 'runc' }] };
    assert.deepEqual(service.ListPodSandbox!.responseSerialize(sandboxes), serializerOf('ListPodSandbox')(sandboxes));
    assert.equal(service.Version!.responseSerialize, cri.RuntimeService.service.Version.responseSerialize, 'other methods keep their serializer');
  });

  it('encodes each item object once', () => {
    const { encoder, counter } = countingEncoder();
    const a = container(1);
    const b = container(2);
    encoder.serialize({ containers: [a, b] });
    encoder.serialize({ containers: [b, a] });
    assert.equal(counter.calls, 2);
    encoder.serialize({ containers: [container(1)] }); // an equal but new object is encoded anew
    assert.equal(counter.calls, 3);
  });

  it('keeps one summary per record and version, encoded after the current turn for records there and written later; forgets deleted ones', async () => {
    const { encoder, counter } = countingEncoder();
    const table = fakeTable([container(1)]);
    let made = 0;
    const summaries = listedSummaries(table, (r: Item) => { made++; return { ...r }; }, (r) => r.state, encoder);
    assert.equal(counter.calls, 0, 'nothing is encoded inside the caller\'s turn');
    await nextTurn();
    assert.equal(counter.calls, 1, 'the record already there');

    table.put(container(2));
    table.put(container(2, 'CONTAINER_EXITED'));
    table.put(container(3));
    table.delete('c3');
    assert.equal(counter.calls, 1);
    await nextTurn();
    assert.equal(counter.calls, 2, 'one encoding for c2 as last written; none for c3, gone before its turn');

    const listed = table.list().map((r) => summaries.get(r));
    assert.equal(made, 2, 'the list reuses the summaries made for the encodings');
    const bytes = encoder.serialize({ containers: listed });
    assert.equal(counter.calls, 2, 'the list used the warm encodings');
    assert.deepEqual(bytes, serializerOf('ListContainers')({ containers: listed }));
    assert.equal(summaries.get(table.get('c2')!), listed[1], 'the same object while the version stays');

    const exited = summaries.get(table.get('c1')!);
    table.delete('c1');
    await nextTurn();
    table.put(container(1));
    assert.notEqual(summaries.get(table.get('c1')!), exited, 'a deleted record\'s summary was forgotten');
  });

  it('ListContainers answers with the summaries its table\'s changes warmed, so listing encodes nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'minicri-lists-'));
    const store = Store.open(join(dir, 'state.db'));
    try {
      const tables = openTables(store);
      const record = (i: number, state: ContainerRecord['state']): ContainerRecord => ({
        id: `c${i}`, sandboxId: 'p1', state, createdAt: '1', startedAt: '0', finishedAt: '0', exitCode: 0, reason: '', message: '',
        config: { metadata: { name: `app${i}`, attempt: 0 }, image: { image: 'busybox' }, labels: {}, annotations: {} } as ContainerRecord['config'],
        image: { id: 'sha256:ab', name: 'busybox', ref: 'sha256:ab' }, dir: '/nowhere', logPath: '', stopSignal: 'SIGTERM',
      });
      const { encoder, counter } = countingEncoder();
      const edge = { pods: { tables, runtimes: new Map(), settings: { default_runtime: 'runc' } }, lists: { containers: encoder } } as unknown as Edge;
      const listContainers = ListContainers(edge);
      tables.containers.put(record(1, 'CONTAINER_CREATED'));
      tables.containers.put(record(2, 'CONTAINER_EXITED'));
      tables.containers.update('c1', (r) => markNeverStarted(r));
      await nextTurn();
      assert.equal(counter.calls, 2);
      const ctx = { log: silentLogger, signal: new AbortController().signal };
      const response = await listContainers({ filter: null }, ctx);
      const bytes = encoder.serialize(response);
      assert.equal(counter.calls, 2, 'the answer was encoded before it was asked for');
      const back = cri.RuntimeService.service.ListContainers.responseDeserialize(bytes);
      assert.deepEqual(back.containers.map((c) => [c.id, c.state]).sort(), [['c1', 'CONTAINER_EXITED'], ['c2', 'CONTAINER_EXITED']]);
    } finally {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
