// In-process coordination: one execution per key at a time (single-flight), and a bound on parallel work.

/** Runs `fn` once per key at a time; concurrent callers with the same key share its promise. */
export class SingleFlight<T> {
  private readonly inflight = new Map<string, Promise<T>>();

  do(key: string, fn: () => Promise<T>): Promise<T> {
    const running = this.inflight.get(key);
    if (running) return running;
    const p = fn().finally(() => this.inflight.delete(key));
    this.inflight.set(key, p);
    return p;
  }
}

/** A counting semaphore: at most `limit` callers inside run() at once. */
export class Semaphore {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly limit: number) {}

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.active++;
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    }
  }
}

/** Serializes async critical sections (metadata commits, garbage collection) in one process. */
export class Mutex {
  private tail: Promise<unknown> = Promise.resolve();

  lock<T>(fn: () => Promise<T> | T): Promise<T> {
    const p = this.tail.then(fn);
    this.tail = p.catch(() => undefined);
    return p;
  }
}
