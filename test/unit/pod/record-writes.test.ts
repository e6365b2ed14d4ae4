// Each state transition with the write that records it refused by sqlite: the operation fails, and what
// memory holds is what sqlite holds, for every table (the record never runs ahead of its row).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { silentLogger } from '../../../core/log.js';
import { createContainer } from '../../../pod/container-create.js';
import { containerNow } from '../../../pod/container-refresh.js';
import { startContainer } from '../../../pod/container-start.js';
import { stopContainer } from '../../../pod/container-stop.js';
import { recover } from '../../../pod/recovery.js';
import { runSandbox } from '../../../pod/sandbox-run.js';
import { stopSandbox } from '../../../pod/sandbox-stop.js';
import { fakePods, type FakePods } from '../../support/fake-pods.js';
import { containerConfig, sandboxConfig } from '../spec/fixtures.js';

const INJECTED = /injected write failure/;

/**
 * Makes sqlite refuse the writes of `kind` records whose body matches `when` (SQL over `body`), through a
 * trigger another connection adds: a real failed write, as a full disk or an I/O error gives.
 */
function refuseWrites(f: FakePods, kind: string, when: string): void {
  const db = new Database(join(f.dir, 'minicri.db'));
  db.exec(`CREATE TRIGGER refuse BEFORE INSERT ON records WHEN NEW.kind = '${kind}' AND (${when.replaceAll('body', 'NEW.body')})
           BEGIN SELECT RAISE(ABORT, 'injected write failure'); END`);
  db.close();
}

function allowWrites(f: FakePods): void {
  const db = new Database(join(f.dir, 'minicri.db'));
  db.exec('DROP TRIGGER refuse');
  db.close();
}

/** Every table in memory holds exactly the rows sqlite holds. */
function assertMemoryIsSqlite(f: FakePods): void {
  const db = new Database(join(f.dir, 'minicri.db'), { readonly: true });
  try {
    for (const table of Object.values(f.ctx.tables)) {
      const rows = db.prepare('SELECT body FROM records WHERE kind = ? ORDER BY id').all(table.kind) as { body: string }[];
      const inMemory = [...table.list()].sort((a, b) => (a.id < b.id ? -1 : 1));
      assert.deepEqual(inMemory, rows.map((r) => JSON.parse(r.body) as unknown), `table ${table.kind}`);
    }
  } finally {
    db.close();
  }
}

const stateIs = (state: string) => `json_extract(body, '$.state') = '${state}'`;
const notCreating = `json_extract(body, '$.creating') IS NULL`;

describe('a refused write at each transition leaves memory as sqlite has it', () => {
  let f: FakePods;
  beforeEach(() => { f = fakePods(); });
  afterEach(() => f.close());

  const pod = () => sandboxConfig({ log_directory: join(f.dir, 'logs') });
  const config = () => containerConfig({
    image: { image: 'example.test/app:1', annotations: {}, user_specified_image: '', runtime_handler: '', image_ref: '' },
  });
  const container = async () => createContainer(f.ctx, await runSandbox(f.ctx, pod(), '', silentLogger), config(), null, silentLogger);
  /** The fake runtime reports every container exited, as conmon's exit file would. */
  const exitAll = () => {
    const runtime = f.ctx.runtimes.get('runc')!;
    runtime.exits.mayHaveExited = () => true;
    runtime.exitStatus = async () => ({ exitCode: 0, finishedAt: new Date(), oomKilled: false });
  };

  it('sandbox ready: the creation is undone', async () => {
    refuseWrites(f, 'sandbox', stateIs('SANDBOX_READY'));
    await assert.rejects(runSandbox(f.ctx, pod(), '', silentLogger), INJECTED);
    assert.deepEqual(f.ctx.tables.sandboxes.list(), []);
    assertMemoryIsSqlite(f);
  });

  it('sandbox not ready: the sandbox stays READY', async () => {
    const id = await runSandbox(f.ctx, pod(), '', silentLogger);
    refuseWrites(f, 'sandbox', `${stateIs('SANDBOX_NOTREADY')} AND ${notCreating}`);
    await assert.rejects(stopSandbox(f.ctx, id, silentLogger), INJECTED);
    assert.equal(f.ctx.tables.sandboxes.get(id)!.state, 'SANDBOX_READY');
    assertMemoryIsSqlite(f);
  });

  it('container created: the creation is undone', async () => {
    const sandboxId = await runSandbox(f.ctx, pod(), '', silentLogger);
    refuseWrites(f, 'container', notCreating);
    await assert.rejects(createContainer(f.ctx, sandboxId, config(), null, silentLogger), INJECTED);
    assert.deepEqual(f.ctx.tables.containers.list(), []);
    assertMemoryIsSqlite(f);
  });

  it('container running: the container stays CREATED', async () => {
    const id = await container();
    refuseWrites(f, 'container', stateIs('CONTAINER_RUNNING'));
    await assert.rejects(startContainer(f.ctx, id, silentLogger), INJECTED);
    assert.equal(f.ctx.tables.containers.get(id)!.state, 'CONTAINER_CREATED');
    assertMemoryIsSqlite(f);
  });

  it('start failed: the container stays CREATED', async () => {
    const id = await container();
    f.failing.add('start');
    refuseWrites(f, 'container', `json_extract(body, '$.reason') = 'StartError'`);
    await assert.rejects(startContainer(f.ctx, id, silentLogger), INJECTED);
    assert.equal(f.ctx.tables.containers.get(id)!.state, 'CONTAINER_CREATED');
    assertMemoryIsSqlite(f);
  });

  it('stopped before it was started: the container stays CREATED', async () => {
    const id = await container();
    refuseWrites(f, 'container', stateIs('CONTAINER_EXITED'));
    await assert.rejects(stopContainer(f.ctx, id, 0, silentLogger), INJECTED);
    assert.equal(f.ctx.tables.containers.get(id)!.state, 'CONTAINER_CREATED');
    assertMemoryIsSqlite(f);
  });

  it('exited: the container stays RUNNING', async () => {
    const id = await container();
    await startContainer(f.ctx, id, silentLogger);
    exitAll();
    refuseWrites(f, 'container', stateIs('CONTAINER_EXITED'));
    await assert.rejects(containerNow(f.ctx, id), INJECTED);
    assert.equal(f.ctx.tables.containers.get(id)!.state, 'CONTAINER_RUNNING');
    assertMemoryIsSqlite(f);
  });

  it('lost while the daemon was down: recovery goes on, the container stays RUNNING', async () => {
    const id = await container();
    await startContainer(f.ctx, id, silentLogger);
    refuseWrites(f, 'container', `json_extract(body, '$.reason') = 'Unknown'`);
    // Neither an exit file nor runc state: the fakes report both absent.
    await recover(f.ctx, silentLogger);
    assert.equal(f.ctx.tables.containers.get(id)!.state, 'CONTAINER_RUNNING');
    assertMemoryIsSqlite(f);
    // The refused write was that transition's: let through, the same recovery records the loss.
    allowWrites(f);
    await recover(f.ctx, silentLogger);
    assert.deepEqual([f.ctx.tables.containers.get(id)!.state, f.ctx.tables.containers.get(id)!.reason], ['CONTAINER_EXITED', 'Unknown']);
    assertMemoryIsSqlite(f);
  });

  it('in tests, a record read from a table cannot be changed outside update', async () => {
    const id = await container();
    const record = f.ctx.tables.containers.get(id)!;
    assert.throws(() => { (record as { pid?: number }).pid = 1; }, TypeError);
    assert.throws(() => { record.config.labels['x'] = 'y'; }, TypeError);
    assert.throws(() => { f.ctx.tables.containers.list()[0]!.timeline!.push({ step: 'x', ms: 0 }); }, TypeError);
  });
});
