import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { AlreadyExists, InvalidArgument, NotFound } from '../../../core/errors.js';
import { Store } from '../../../store/store.js';

interface Pod { id: string; name: string; state: string }

// What the tables hand out is frozen here, as in every test: a change outside update throws.
process.env.MINICRI_TEST_FROZEN_RECORDS = '1';

describe('store', () => {
  const dir = mkdtempSync(join(tmpdir(), 'minicri-store-'));
  const path = join(dir, 'state.db');
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps records and meta across reopen', () => {
    let store = Store.open(path);
    store.table<Pod>('sandbox', (p) => p.name).put({ id: 'aaa1', name: 'web', state: 'READY' });
    store.setMeta('pod_cidr', '10.1.0.0/16');
    store.close();
    store = Store.open(path);
    const pods = store.table<Pod>('sandbox', (p) => p.name);
    assert.deepEqual(pods.get('aaa1'), { id: 'aaa1', name: 'web', state: 'READY' });
    assert.equal(store.getMeta('pod_cidr'), '10.1.0.0/16');
    store.close();
  });

  it('reserves a name for one record only, and frees it on delete', () => {
    const store = Store.open(path);
    const pods = store.table<Pod>('sandbox', (p) => p.name);
    assert.throws(() => pods.put({ id: 'bbb2', name: 'web', state: 'READY' }),
      (err) => err instanceof AlreadyExists && /aaa1/.test(err.message));
    pods.update('aaa1', (p) => { p.state = 'NOTREADY'; });
    assert.equal(pods.get('aaa1')?.state, 'NOTREADY');
    pods.delete('aaa1');
    pods.put({ id: 'bbb2', name: 'web', state: 'READY' });
    assert.throws(() => pods.put({ id: 'ccc4', name: 'web', state: 'READY' }),
      (err) => err instanceof AlreadyExists && /bbb2/.test(err.message));
    store.close();
  });

  it('finds by unique prefix, refuses ambiguous ones, and reports unknown ids', () => {
    const store = Store.open(path);
    const pods = store.table<Pod>('sandbox', (p) => p.name);
    pods.put({ id: 'bbb3', name: 'db', state: 'READY' });
    assert.equal(pods.find('bbb2').name, 'web');
    assert.throws(() => pods.find('bbb'), InvalidArgument);
    assert.throws(() => pods.find('zzz'), NotFound);
    assert.equal(pods.lookup('zzz'), undefined);
    assert.equal(pods.find('bbb3').name, 'db');
    store.close();
  });

  it('tells change listeners of each write and delete, after the table holds the change, and of nothing refused', () => {
    const store = Store.open(path);
    const pods = store.table<Pod>('sandbox', (p) => p.name);
    const seen: string[] = [];
    pods.onChange((id) => seen.push(`${id}:${pods.get(id)?.state ?? 'gone'}`));
    pods.put({ id: 'ddd5', name: 'cache', state: 'READY' });
    pods.update('ddd5', (p) => { p.state = 'NOTREADY'; });
    assert.throws(() => pods.put({ id: 'eee6', name: 'cache', state: 'READY' }), AlreadyExists);
    pods.delete('ddd5');
    pods.delete('ddd5');
    assert.deepEqual(seen, ['ddd5:READY', 'ddd5:NOTREADY', 'ddd5:gone']);
    store.close();
  });

  it('keeps its own copy of what is put, hands out frozen records, and changes them only through update', () => {
    const store = Store.open(path);
    const pods = store.table<Pod>('sandbox', (p) => p.name);
    const mine = { id: 'fff7', name: 'api', state: 'READY' };
    pods.put(mine);
    mine.state = 'CHANGED';
    assert.equal(pods.get('fff7')!.state, 'READY');
    assert.throws(() => { pods.get('fff7')!.state = 'NOTREADY'; }, TypeError);
    assert.throws(() => { pods.list().find((p) => p.id === 'fff7')!.name = 'other'; }, TypeError);
    const before = pods.get('fff7');
    const after = pods.update('fff7', (p) => ({ ...p, state: 'NOTREADY' }));
    assert.deepEqual([before!.state, after.state, pods.get('fff7')!.state], ['READY', 'NOTREADY', 'NOTREADY']);
    store.close();
  });

  it('leaves memory as it was when sqlite refuses a write', () => {
    const store = Store.open(path);
    const pods = store.table<Pod>('sandbox', (p) => p.name);
    const db = new Database(path);
    db.exec(`CREATE TRIGGER refuse BEFORE INSERT ON records WHEN json_extract(NEW.body, '$.state') = 'GONE'
             BEGIN SELECT RAISE(ABORT, 'injected write failure'); END`);
    assert.throws(() => pods.update('fff7', (p) => { p.state = 'GONE'; p.name = 'renamed'; }), /injected write failure/);
    assert.throws(() => pods.put({ id: 'ggg8', name: 'gone', state: 'GONE' }), /injected write failure/);
    db.exec('DROP TRIGGER refuse');
    db.close();
    assert.deepEqual(pods.get('fff7'), { id: 'fff7', name: 'api', state: 'NOTREADY' });
    assert.equal(pods.get('ggg8'), undefined);
    // The name is still the record's own: another record cannot take it, and the one refused did not.
    assert.throws(() => pods.put({ id: 'hhh9', name: 'api', state: 'READY' }), AlreadyExists);
    pods.put({ id: 'hhh9', name: 'gone', state: 'READY' });
    store.close();
  });
});
