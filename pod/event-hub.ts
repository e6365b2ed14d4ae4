// Fan-out of events to any number of subscribers, each in order, none able to slow the publisher or
// grow memory without bound: a publish only appends to each subscriber's queue, and a subscriber whose
// queue passes the bound (it reads slower than events come) is cut off, its queue dropped.

/** Why a subscription ended: the subscriber left, it fell too far behind, or the hub closed (shutdown). */
export type SubscriptionEnd = 'unsubscribed' | 'overflow' | 'closed';

export interface Subscription<T> {
  /** The next event, waiting for one; undefined once the subscription has ended (see `ended`). */
  next(): Promise<T | undefined>;
  /** Why it ended, once it has; events still queued are not handed out after an end. */
  readonly ended: SubscriptionEnd | undefined;
  /** Resolves when the subscription ends, with why. */
  readonly done: Promise<SubscriptionEnd>;
  /** Leaves the hub; idempotent. */
  unsubscribe(): void;
}

/** What a publisher sees of the hub. */
export interface EventSink<T> {
  /** Whether anyone listens: a publisher may skip building an event nobody would get. */
  readonly listening: boolean;
  publish(event: T): void;
}

class Subscriber<T> implements Subscription<T> {
  private queue: T[] = [];
  private waiting: ((event: T | undefined) => void) | undefined;
  private endedWith: SubscriptionEnd | undefined;
  private resolveDone!: (end: SubscriptionEnd) => void;
  readonly done = new Promise<SubscriptionEnd>((resolve) => { this.resolveDone = resolve; });

  constructor(private readonly bound: number, private readonly leave: (s: Subscriber<T>) => void) {}

  get ended(): SubscriptionEnd | undefined {
    return this.endedWith;
  }

  offer(event: T): void {
    if (this.waiting) {
      const wake = this.waiting;
      this.waiting = undefined;
      wake(event);
    } else if (this.queue.length >= this.bound) {
      this.end('overflow');
    } else {
      this.queue.push(event);
    }
  }

  next(): Promise<T | undefined> {
    if (this.endedWith) return Promise.resolve(undefined);
    if (this.queue.length > 0) return Promise.resolve(this.queue.shift());
    return new Promise((resolve) => { this.waiting = resolve; });
  }

  end(why: SubscriptionEnd): void {
    if (this.endedWith) return;
    this.endedWith = why;
    this.queue = [];
    this.leave(this);
    this.waiting?.(undefined);
    this.waiting = undefined;
    this.resolveDone(why);
  }

  unsubscribe(): void {
    this.end('unsubscribed');
  }
}

export class EventHub<T> implements EventSink<T> {
  private readonly subscribers = new Set<Subscriber<T>>();
  private closed = false;

  /** `bound`: how many events a subscriber may have waiting before it is cut off. */
  constructor(readonly bound: number) {
    if (!Number.isInteger(bound) || bound < 1) throw new RangeError(`an event hub's bound must be a positive integer, not ${bound}`);
  }

  get listening(): boolean {
    return this.subscribers.size > 0;
  }

  get subscriberCount(): number {
    return this.subscribers.size;
  }

  /** A new subscriber gets every event published from now on; after close() it is ended at once. */
  subscribe(): Subscription<T> {
    const s = new Subscriber<T>(this.bound, (gone) => this.subscribers.delete(gone));
    if (this.closed) s.end('closed');
    else this.subscribers.add(s);
    return s;
  }

  publish(event: T): void {
    for (const s of [...this.subscribers]) s.offer(event);
  }

  /** Ends every subscription (the daemon is stopping) and refuses new ones. */
  close(): void {
    this.closed = true;
    for (const s of [...this.subscribers]) s.end('closed');
  }
}
