// When the daemon's calls leave it alone for a moment. Work nobody waits for (the host cleanup of a removed
// container) waits for such a moment, at most a second, so that it does not take the CPU of a 2-core node
// from the calls that somebody does wait for: kubelet's relist right after a removal took twice as long while
// the removal's unmount, cgroup and directory removals ran beside it.

/** How long no call may have been under way for the daemon to count as quiet. */
const QUIET_MS = 20;
/** The longest work waits for quiet: a node whose calls never stop still gets its host objects back. */
const MAX_WAIT_MS = 1000;

export interface CallQuietOptions {
  quietMs?: number;
  maxWaitMs?: number;
  /** Milliseconds on a monotonic clock. */
  now?: () => number;
}

export class CallQuiet {
  private inFlight = 0;
  private lastAt = -Infinity;
  /** Callers of quiet() still waiting, and the one look for quiet they share. */
  private waiting = 0;
  private next: Promise<void> | undefined;
  private readonly quietMs: number;
  private readonly maxWaitMs: number;
  private readonly now: () => number;

  constructor(opts: CallQuietOptions = {}) {
    this.quietMs = opts.quietMs ?? QUIET_MS;
    this.maxWaitMs = opts.maxWaitMs ?? MAX_WAIT_MS;
    this.now = opts.now ?? (() => performance.now());
  }

  /** A call began. */
  begin(): void {
    this.inFlight++;
    this.lastAt = this.now();
  }

  /** A call ended (answered or failed). */
  end(): void {
    this.inFlight--;
    this.lastAt = this.now();
  }

  /** How long to wait before calls may be quiet: 0 when they are (none under way, none ended within quietMs). */
  untilQuietMs(): number {
    if (this.inFlight > 0) return this.quietMs;
    return Math.max(0, this.quietMs - (this.now() - this.lastAt));
  }

  /** Resolves once calls are quiet, or maxWaitMs after it was asked, whichever comes first. */
  quiet(): Promise<void> {
    if (this.untilQuietMs() === 0) return Promise.resolve();
    // One timer looks for quiet for every waiter (a storm of removals makes hundreds), and only while one waits.
    this.waiting++;
    this.next ??= this.watch().finally(() => { this.next = undefined; });
    let timer: NodeJS.Timeout | undefined;
    const capped = new Promise<void>((resolve) => { timer = setTimeout(resolve, this.maxWaitMs); });
    return Promise.race([this.next, capped]).finally(() => {
      clearTimeout(timer);
      this.waiting--;
    });
  }

  private async watch(): Promise<void> {
    for (let wait = this.untilQuietMs(); wait > 0 && this.waiting > 0; wait = this.untilQuietMs()) {
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}
