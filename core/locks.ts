// In-process coordination, the project's only locks and queues: one at a time (Mutex), one at a time per key
// (KeyedLock), at most n at a time (Semaphore, and pool over a list), and one shared run per key (SingleFlight).

/** Runs critical sections one at a time, in the order they were asked for; a failure does not stop the queue. */
export class Mutex {
  private tail: Promise<unknown> = Promise.resolve();

  lock<T>(fn: () => Promise<T> | T): Promise<T> {
    const p = this.tail.then(fn);
    this.tail = p.catch(() => undefined);
    return p;
  }
}

/** A Mutex per key: operations on one sandbox or container run one at a time, others in parallel. */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<void>>();

  /** Whether any operation holds or waits for a lock. */
  get busy(): boolean {
    return this.tails.size > 0;
  }

  /**
   * Takes `key` for a body that runs later: the claim is queued at once, as `run` queues it, and the promise
   * gives the function that lets the next holder in.
   */
  hold(key: string): Promise<() => void> {
    return new Promise((acquired) => {
      void this.run(key, () => new Promise<void>((release) => acquired(release)));
    });
  }

  async run<T>(key: string, body: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => { release = resolve; });
    const tail = previous.then(() => mine);
    this.tails.set(key, tail);
    await previous;
    try {
      return await body();
    } finally {
      release();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }
}

/** A counting semaphore: at most `limit` callers inside run() at once. */
export class Semaphore {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly limit: number) {}

  /** Waits for a place (giving up when `signal` aborts), then runs `fn`. */
  async run<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    signal?.throwIfAborted();
    if (this.active >= this.limit) {
      await new Promise<void>((resolve, reject) => {
        const enter = () => { signal?.removeEventListener('abort', leave); resolve(); };
        const leave = () => {
          this.waiting.splice(this.waiting.indexOf(enter), 1);
          reject(signal!.reason);
        };
        this.waiting.push(enter);
        signal?.addEventListener('abort', leave, { once: true });
      });
    } else this.active++;
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    }
  }
}

/** Runs `fn` over `items` with at most `limit` in flight; the results keep the items' order. */
export function pool<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const places = new Semaphore(limit);
  return Promise.all(items.map((item, i) => places.run(() => fn(item, i))));
}

interface Flight<T> { promise: Promise<T>; controller: AbortController; waiters: number }

/**
 * Runs `fn` once per key at a time; concurrent callers with the same key share its run. A caller whose
 * `signal` aborts stops waiting; the run itself is aborted (through the signal `fn` gets) only when its last
 * caller has gone, and that caller's rejection waits for the run to settle, so nothing is written after it.
 */
export class SingleFlight<T> {
  private readonly inflight = new Map<string, Flight<T>>();

  do(key: string, fn: (signal: AbortSignal) => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    let f = this.inflight.get(key);
    if (!f) {
      const controller = new AbortController();
      const flight: Flight<T> = { promise: Promise.resolve().then(() => fn(controller.signal)), controller, waiters: 0 };
      flight.promise.then(() => undefined, () => undefined).finally(() => {
        if (this.inflight.get(key) === flight) this.inflight.delete(key);
      });
      this.inflight.set(key, flight);
      f = flight;
    }
    const flight = f;
    flight.waiters++;
    if (!signal) return flight.promise.finally(() => { flight.waiters--; });
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        if (--flight.waiters > 0) {
          reject(signal.reason);
          return;
        }
        // The last one waiting: stop the run, and answer once it has cleaned up after itself.
        this.inflight.delete(key);
        flight.controller.abort(signal.reason);
        flight.promise.then(() => reject(signal.reason), () => reject(signal.reason));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      flight.promise.then(
        (v) => { if (!signal.aborted) { signal.removeEventListener('abort', onAbort); flight.waiters--; resolve(v); } },
        (e: unknown) => { if (!signal.aborted) { signal.removeEventListener('abort', onAbort); flight.waiters--; reject(e); } },
      );
    });
  }
}
