// Registry Authorization headers (bearer tokens, basic) kept per endpoint, scope and credential, so the requests
// of a pull after its first skip the 401 round trip. Bounded: a registry chooses its tokens' size and lifetime.
/** A token longer than this is used for its pull but not kept: real ones are a few KiB. */
export const MAX_CACHED_TOKEN_CHARS = 16 << 10;

export class TokenCache {
  /** In use order, least recently used first (a Map keeps insertion order). */
  private readonly entries = new Map<string, { header: string; expires: number }>();

  constructor(private readonly maxEntries: number, private readonly maxLifetimeSeconds: number, private readonly now = Date.now) {}

  get size(): number {
    return this.entries.size;
  }

  get(key: string): string | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    this.entries.delete(key);
    if (e.expires <= this.now()) return undefined;
    this.entries.set(key, e);
    return e.header;
  }

  set(key: string, header: string, ttlSeconds: number): void {
    this.entries.delete(key);
    if (header.length > MAX_CACHED_TOKEN_CHARS || this.maxEntries <= 0) return;
    const seconds = Math.min(ttlSeconds, this.maxLifetimeSeconds);
    this.entries.set(key, { header, expires: this.now() + seconds * 1000 });
    for (const oldest of this.entries.keys()) {
      if (this.entries.size <= this.maxEntries) break;
      this.entries.delete(oldest);
    }
  }

  delete(key: string): void {
    this.entries.delete(key);
  }
}
