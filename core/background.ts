// Work an operation starts and does not wait for, such as what a removal releases after its answer. It is
// tracked so that shutdown lets it end before the store it writes to closes; its failures are logged, and
// whoever started it keeps a durable record to retry from.
import type { Logger } from './log.js';

export class Background {
  private readonly running = new Set<Promise<void>>();
  private flush!: () => void;
  private readonly flushed = new Promise<void>((resolve) => { this.flush = resolve; });

  /** `quiet`: resolves when work that can wait may start (see `later`); by default at once. */
  constructor(private readonly log: Logger, private readonly quiet: () => Promise<void> = async () => undefined) {}

  /** Starts `work` now without waiting for it; `what` names it in the log if it fails. */
  run(what: string, work: () => Promise<unknown>): void {
    const task: Promise<void> = work()
      .then(() => undefined, (err: unknown) => {
        this.log.warn({ err: (err as Error).message }, `${what} failed; it is retried in the background`);
      })
      .finally(() => this.running.delete(task));
    this.running.add(task);
  }

  /**
   * Like run, but `work` starts only once `quiet` resolves (the daemon's calls leave it alone for a moment):
   * work nobody waits for then yields the CPU to the calls somebody does wait for. drain() starts it at once.
   */
  later(what: string, work: () => Promise<unknown>): void {
    this.run(what, async () => {
      await Promise.race([this.quiet(), this.flushed]);
      return work();
    });
  }

  /** Waits until nothing started here runs any more (work started meanwhile included); what waits in `later` starts now. */
  async drain(): Promise<void> {
    this.flush();
    while (this.running.size > 0) await Promise.all(this.running);
  }
}
