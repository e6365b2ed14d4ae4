// Per-object locks: operations on one sandbox or container run one at a time, others in parallel.
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
