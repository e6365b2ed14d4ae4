// Work an operation starts and does not wait for, such as what a removal releases after its answer. It is
// tracked so that shutdown lets it end before the store it writes to closes; its failures are logged, and
// whoever started it keeps a durable record to retry from.
import type { Logger } from './log.js';

export class Background {
  private readonly running = new Set<Promise<void>>();

  constructor(private readonly log: Logger) {}

  /**
   * Starts `work` now; `what` names it in the log if it fails. The promise returned resolves when it ends,
   * failed or not, for a caller that may wait for it a while.
   */
  run(what: string, work: () => Promise<unknown>): Promise<void> {
    const task: Promise<void> = work()
      .then(() => undefined, (err: unknown) => {
        this.log.warn({ err: (err as Error).message }, `${what} failed; it is retried in the background`);
      })
      .finally(() => this.running.delete(task));
    this.running.add(task);
    return task;
  }

  /** Waits until nothing started here runs any more (work started meanwhile included). */
  async drain(): Promise<void> {
    while (this.running.size > 0) await Promise.all(this.running);
  }
}
