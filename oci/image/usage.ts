// Bytes and inodes a directory tree uses (a layer, a container's writable layer), without following links, and
// the cache of writable layers' usage. A pod can fill its writable layer with millions of files: the walk
// goes directory by directory without holding a listing, can stop after any entry and go on at the next call,
// and gives the event loop back every few milliseconds; a stats call reuses a value up to 10 s old.
import { lstatSync, type Dir, type Stats } from 'node:fs';
import { opendir } from 'node:fs/promises';
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';

export interface Usage { bytes: number; inodes: number }

/** Sync work between two turns of the event loop. */
const SLICE_MS = 5;
/**
 * Hard-linked inodes a walk remembers so each counts once: a set of numbers, about 40 bytes each. A layer with
 * more (millions of links, made by the pod) would otherwise grow the daemon by as much; past this many, further
 * inodes with links are counted at every link, so such a layer may be over-counted.
 */
export const MAX_LINKED_INODES = 100_000;

/**
 * One walk of a tree, in steps. Open directories sit on a stack (as deep as the tree, which PATH_MAX bounds,
 * never as wide), each read a batch of entries at a time. Entries are lstat'ed synchronously, a slice at a time:
 * on a local filesystem that is a dentry lookup, cheaper than the thread-pool round trip per inode an async
 * lstat costs, and it leaves libuv's four threads to pulls and file I/O.
 */
export class UsageWalk {
  private readonly stack: Array<{ path: string; dir: Dir }> = [];
  /** Inodes with more than one link: counted once, the first `maxLinked` of them. */
  private readonly linked = new Set<number>();
  private bytes = 0;
  private inodes = 0;
  private dev: number | undefined;
  private started = false;
  /** Entries looked at so far. */
  visited = 0;
  done = false;

  constructor(readonly root: string, private readonly maxLinked = MAX_LINKED_INODES) {}

  /**
   * Walks on until the tree is done (its usage returned) or `stop()` says so (undefined returned; the next
   * step goes on from there). `stop` is asked after every entry, so a step always makes progress.
   */
  async step(stop: () => boolean): Promise<Usage | undefined> {
    let slice = performance.now();
    if (!this.started) {
      this.started = true;
      await this.visit(this.root);
    }
    while (this.stack.length > 0) {
      const top = this.stack.at(-1)!;
      const entry = await top.dir.read().catch(() => null);
      if (!entry) {
        this.stack.pop();
        await top.dir.close().catch(() => undefined);
        continue;
      }
      await this.visit(join(top.path, entry.name));
      if (stop()) return undefined;
      if (performance.now() - slice > SLICE_MS) {
        await nextTurn();
        slice = performance.now();
      }
    }
    this.done = true;
    return { bytes: this.bytes, inodes: this.inodes };
  }

  /** Counts one entry and opens it when it is a directory on the tree's filesystem. */
  private async visit(path: string): Promise<void> {
    this.visited++;
    let st: Stats | undefined;
    try {
      st = lstatSync(path, { throwIfNoEntry: false });
    } catch { /* gone or unreadable: not counted */ }
    if (!st) return;
    this.dev ??= st.dev;
    if (st.nlink > 1 && !st.isDirectory()) {
      if (this.linked.has(st.ino)) return;
      if (this.linked.size < this.maxLinked) this.linked.add(st.ino);
    }
    this.inodes += 1;
    this.bytes += st.blocks * 512;
    if (st.isDirectory() && st.dev === this.dev) {
      const dir = await opendir(path, { bufferSize: 128 }).catch(() => undefined);
      if (dir) this.stack.push({ path, dir });
    }
  }

  /** Closes what a walk given up on holds open. */
  async close(): Promise<void> {
    for (const { dir } of this.stack.splice(0)) await dir.close().catch(() => undefined);
  }
}

/** A whole walk of `path` at once: for trees that are measured once (an unpacked layer, the content store). */
export async function diskUsage(path: string): Promise<Usage> {
  return (await new UsageWalk(path).step(() => false))!;
}

export interface CachedUsage extends Usage {
  /** When the walk that measured it ended. */
  timestamp: Date;
}

export interface UsageCacheOptions {
  /** A value younger than this is answered without walking, unless a caller asks for younger (default 10 s). */
  maxAgeMs?: number;
  /** The stop condition of one call's step of a walk (default: after 1 s). */
  budget?: () => () => boolean;
  now?: () => number;
}

interface Entry { value?: CachedUsage; walk?: UsageWalk; step?: Promise<void>; asked: number }

/**
 * Usage of writable layers by path. A value up to `maxAgeMs` old is answered as it is; an older one starts (or
 * goes on with) a walk for one call's budget, and while that walk is unfinished the last value is answered
 * (none before the first walk ends). Callers asking at once share one step. Paths not asked for in a while go.
 */
export class UsageCache {
  private readonly entries = new Map<string, Entry>();
  private readonly maxAgeMs: number;
  private readonly budget: () => () => boolean;
  private readonly now: () => number;

  constructor(opts: UsageCacheOptions = {}) {
    this.maxAgeMs = opts.maxAgeMs ?? 10_000;
    this.budget = opts.budget ?? (() => { const end = performance.now() + 1000; return () => performance.now() > end; });
    this.now = opts.now ?? Date.now;
  }

  /** The usage of `path`, measured at most `maxAgeMs` ago unless its walk is still under way (see above). */
  async get(path: string, maxAgeMs = this.maxAgeMs): Promise<CachedUsage | undefined> {
    this.forgetUnasked();
    let e = this.entries.get(path);
    if (!e) this.entries.set(path, e = { asked: 0 });
    e.asked = this.now();
    if (e.value && e.asked - e.value.timestamp.getTime() < maxAgeMs) return e.value;
    e.step ??= this.advance(path, e).finally(() => { e.step = undefined; });
    await e.step;
    return e.value;
  }

  private async advance(path: string, e: Entry): Promise<void> {
    e.walk ??= new UsageWalk(path);
    const usage = await e.walk.step(this.budget());
    if (!usage) return;
    e.walk = undefined;
    e.value = { ...usage, timestamp: new Date(this.now()) };
  }

  /** Drops the paths nobody asked about for six lifetimes (their containers are gone, mostly). */
  private forgetUnasked(): void {
    const now = this.now();
    for (const [path, e] of this.entries) {
      if (now - e.asked <= 6 * this.maxAgeMs || e.step) continue;
      void e.walk?.close();
      this.entries.delete(path);
    }
  }
}

/** The daemon's one cache: stats and the container filesystem's usage ask about the same upper directories. */
export const writableLayerUsage = new UsageCache();
