// One operation at a time per key (a pod): ADD, CHECK and DEL of the same pod never overlap.

export class KeyedMutex {
  private readonly tails = new Map<string, Promise<void>>();

  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const tail = prev.then(() => mine);
    this.tails.set(key, tail);
    await prev;
    try {
      return await fn();
    } finally {
      release();
      // Forget the key once nobody queued behind us, so the map does not grow with every pod ever seen.
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }
}
