// Single-use, short-lived tokens naming a validated streaming request: the CRI call validates and
// stores, the client redeems the token at the HTTP server exactly once.
import { randomBytes } from 'node:crypto';
import { ResourceExhausted } from '../core/errors.js';

export const TOKEN_TTL_MS = 60_000;
/** Pending (issued, not yet redeemed) tokens at most; kubelet redeems within a second or two. */
export const MAX_PENDING_TOKENS = 1000;

export class TokenCache<T> {
  private readonly entries = new Map<string, { value: T; expires: number }>();

  constructor(
    private readonly now: () => number = Date.now,
    private readonly ttlMs = TOKEN_TTL_MS,
    private readonly max = MAX_PENDING_TOKENS,
  ) {}

  /** Stores `value` under a new random token (URL-safe, 128 bits). */
  issue(value: T): string {
    this.sweep();
    if (this.entries.size >= this.max) {
      throw new ResourceExhausted(
        `${this.entries.size} streaming requests are waiting to be used: use or let them expire (after ${this.ttlMs / 1000}s) first`,
      );
    }
    const token = randomBytes(16).toString('base64url');
    this.entries.set(token, { value, expires: this.now() + this.ttlMs });
    return token;
  }

  /** The value for `token` without using it up; undefined when unknown or expired. */
  peek(token: string): T | undefined {
    const e = this.entries.get(token);
    return e && e.expires > this.now() ? e.value : undefined;
  }

  /** The value for `token` once; undefined when unknown, already used or expired. */
  take(token: string): T | undefined {
    const e = this.entries.get(token);
    if (!e) return undefined;
    this.entries.delete(token);
    return e.expires > this.now() ? e.value : undefined;
  }

  get size(): number {
    this.sweep();
    return this.entries.size;
  }

  private sweep(): void {
    const now = this.now();
    for (const [k, e] of this.entries) if (e.expires <= now) this.entries.delete(k);
  }
}
