// The state store: the one module that speaks SQL. Records live in sqlite (WAL) and in memory;
// reads come from memory so kubelet's relists never touch the disk, writes go through synchronously.
// Memory holds the table's own copies, changed only by a write that sqlite took: a record a caller holds
// is never the cached one, so a failed write leaves memory as sqlite has it.
import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { AlreadyExists, InvalidArgument, NotFound } from '../core/errors.js';

/** Schema versions, applied in order; `user_version` records how many ran. Never edit one that shipped. */
const MIGRATIONS: string[] = [
  `CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
   CREATE TABLE records (
     kind TEXT NOT NULL,
     id TEXT NOT NULL,
     reservation TEXT,
     body TEXT NOT NULL,
     PRIMARY KEY (kind, id),
     UNIQUE (kind, reservation)
   );`,
];

export interface StoredRecord {
  id: string;
}

/**
 * Test-only: with MINICRI_TEST_FROZEN_RECORDS=1 every cached record is deep-frozen, so a change made to what
 * `get` or `list` returned, rather than through `update`, throws. The unit tests' store and the integration
 * tests' daemon set it; production leaves records unfrozen (freezing costs a walk of each record written).
 */
const frozenRecords = () => process.env.MINICRI_TEST_FROZEN_RECORDS === '1';

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/** One kind of record (sandboxes, containers, images), cached in memory, keyed by id. */
export class RecordTable<T extends StoredRecord> {
  private readonly cache = new Map<string, T>();
  private readonly reservations = new Map<string, string>();
  private readonly changeListeners: ((id: string) => void)[] = [];
  private readonly insert: Database.Statement;
  private readonly remove: Database.Statement;
  private readonly freeze = frozenRecords();

  constructor(db: Database.Database, readonly kind: string, private readonly reservationOf: (r: T) => string | undefined) {
    this.insert = db.prepare('INSERT OR REPLACE INTO records (kind, id, reservation, body) VALUES (?, ?, ?, ?)');
    this.remove = db.prepare('DELETE FROM records WHERE kind = ? AND id = ?');
    for (const row of db.prepare('SELECT body FROM records WHERE kind = ?').all(kind) as { body: string }[]) {
      const record = this.own(JSON.parse(row.body) as T);
      this.cache.set(record.id, record);
      const key = reservationOf(record);
      if (key !== undefined) this.reservations.set(key, record.id);
    }
  }

  get(id: string): T | undefined {
    return this.cache.get(id);
  }

  list(): T[] {
    return [...this.cache.values()];
  }

  /** Writes a record (the table keeps a copy); a reservation key held by another record is refused with ALREADY_EXISTS. */
  put(record: T): void {
    this.write(record);
  }

  /**
   * Changes a record and writes it back: `change` gets a copy, which it changes in place or returns a new
   * record for (as the transitions of pod/state.ts do). Returns the record as written.
   */
  update(id: string, change: (r: T) => T | void): T {
    const record = this.cache.get(id);
    if (!record) throw new NotFound(`${this.kind} ${id} not found`);
    const copy = structuredClone(record);
    const next = change(copy) ?? copy;
    this.write(next);
    return this.cache.get(id)!;
  }

  /**
   * Stores `record` in sqlite, then in memory as sqlite has it (parsed back from the row, so no caller
   * holds the cached object): a write sqlite refused leaves memory as it was.
   */
  private write(record: T): void {
    const key = this.reservationOf(record);
    const holder = key === undefined ? undefined : this.reservations.get(key);
    if (holder !== undefined && holder !== record.id) {
      throw new AlreadyExists(
        `${this.kind} name "${key}" is reserved by ${this.kind} ${holder}: remove it first or use another attempt number`);
    }
    const body = JSON.stringify(record);
    this.insert.run(this.kind, record.id, key ?? null, body);
    const previous = this.cache.get(record.id);
    const previousKey = previous && this.reservationOf(previous);
    if (previousKey !== undefined && previousKey !== key) this.reservations.delete(previousKey);
    this.cache.set(record.id, this.own(JSON.parse(body) as T));
    if (key !== undefined) this.reservations.set(key, record.id);
    this.changed(record.id);
  }

  /**
   * Calls `listener` with the id of each record written or deleted from now on, once that is done.
   * A listener must not throw: the write has happened, and its caller would take it for failed.
   */
  onChange(listener: (id: string) => void): void {
    this.changeListeners.push(listener);
  }

  private changed(id: string): void {
    for (const listener of this.changeListeners) listener(id);
  }

  private own(record: T): T {
    return this.freeze ? deepFreeze(record) : record;
  }

  delete(id: string): void {
    const record = this.cache.get(id);
    if (!record) return;
    this.remove.run(this.kind, id);
    this.cache.delete(id);
    const key = this.reservationOf(record);
    if (key !== undefined && this.reservations.get(key) === id) this.reservations.delete(key);
    this.changed(id);
  }

  /**
   * Finds a record by full id or unique id prefix, as crictl passes prefixes.
   * Unknown → NOT_FOUND; a prefix matching several → INVALID_ARGUMENT listing how many.
   */
  find(idOrPrefix: string): T {
    if (!idOrPrefix) throw new InvalidArgument(`${this.kind} id must not be empty`);
    const exact = this.cache.get(idOrPrefix);
    if (exact) return exact;
    const matches: T[] = [];
    for (const [id, record] of this.cache) if (id.startsWith(idOrPrefix)) matches.push(record);
    if (matches.length === 1) return matches[0];
    if (matches.length === 0) throw new NotFound(`${this.kind} "${idOrPrefix}" not found`);
    throw new InvalidArgument(
      `${this.kind} id prefix "${idOrPrefix}" is ambiguous: it matches ${matches.length} ${this.kind}s; give more characters`);
  }

  /** Like find, but absent is not an error (for idempotent stop and remove). */
  lookup(idOrPrefix: string): T | undefined {
    try {
      return this.find(idOrPrefix);
    } catch (err) {
      if (err instanceof NotFound) return undefined;
      throw err;
    }
  }
}

export class Store {
  private constructor(private readonly db: Database.Database) {}

  static open(path: string): Store {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    // Records hold pods' environments: root's alone. SQLite gives the WAL and shared-memory files the
    // database's mode when it makes them; those of an older install are tightened as well.
    closeSync(openSync(path, 'a', 0o600));
    const db = new Database(path);
    db.pragma('journal_mode = WAL');
    for (const file of [path, `${path}-wal`, `${path}-shm`]) if (existsSync(file)) chmodSync(file, 0o600);
    db.pragma('synchronous = NORMAL');
    db.pragma('foreign_keys = ON');
    const applied = db.pragma('user_version', { simple: true }) as number;
    if (applied > MIGRATIONS.length) {
      db.close();
      throw new Error(
        `state database ${path} has schema version ${applied}, newer than this minicri knows (${MIGRATIONS.length}): upgrade minicri`);
    }
    db.transaction(() => {
      MIGRATIONS.slice(applied).forEach((sql) => db.exec(sql));
      db.pragma(`user_version = ${MIGRATIONS.length}`);
    })();
    return new Store(db);
  }

  /** A typed table; `reservationOf` names the unique key a record holds, if any. */
  table<T extends StoredRecord>(kind: string, reservationOf: (r: T) => string | undefined = () => undefined): RecordTable<T> {
    return new RecordTable<T>(this.db, kind, reservationOf);
  }

  getMeta(key: string): string | undefined {
    const row = this.db.prepare('SELECT value FROM meta WHERE key = ?').get(key) as { value: string } | undefined;
    return row?.value;
  }

  setMeta(key: string, value: string): void {
    this.db.prepare('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)').run(key, value);
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
