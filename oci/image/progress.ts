// A running pull's progress, logged at a steady interval: bytes, rate, layers done of total; and, once it has
// run longer than a stalled download may take, a warning that it is slow (before it may fail).
import type { Logger } from '../../core/log.js';

export interface ProgressOptions {
  log: Logger;
  intervalMs: number;
  /** The stall timeout: a pull still running after this long is reported as slow, once. */
  slowAfterMs: number;
  /** Bytes of a blob received so far, while it is downloading. */
  receiving: (digest: string) => number | undefined;
}

export interface ProgressSnapshot {
  layersDone: number;
  layers: number;
  bytes: number;
  totalBytes: number;
  seconds: number;
  mbPerSecond: number;
}

export class PullProgress {
  private readonly done = new Set<string>();
  private readonly started = Date.now();
  private timer: NodeJS.Timeout | undefined;
  private slowTimer: NodeJS.Timeout | undefined;

  constructor(private readonly layers: ReadonlyArray<{ digest: string; size: number }>, private readonly opts: ProgressOptions) {}

  start(): this {
    this.timer = setInterval(() => this.opts.log.info(this.snapshot(), 'image pull in progress'), this.opts.intervalMs).unref();
    this.slowTimer = setTimeout(() => {
      this.opts.log.warn({ ...this.snapshot(), slowAfterSeconds: this.opts.slowAfterMs / 1000 },
        'image pull is slow: it has taken longer than the stall timeout');
    }, this.opts.slowAfterMs).unref();
    return this;
  }

  layerDone(digest: string): void {
    this.done.add(digest);
  }

  stop(): void {
    clearInterval(this.timer);
    clearTimeout(this.slowTimer);
  }

  snapshot(): ProgressSnapshot {
    let bytes = 0;
    for (const l of this.layers) bytes += this.done.has(l.digest) ? l.size : this.opts.receiving(l.digest) ?? 0;
    const seconds = (Date.now() - this.started) / 1000;
    return {
      layersDone: this.layers.filter((l) => this.done.has(l.digest)).length,
      layers: this.layers.length,
      bytes,
      totalBytes: this.layers.reduce((a, l) => a + l.size, 0),
      seconds: Number(seconds.toFixed(1)),
      mbPerSecond: Number((bytes / 1e6 / Math.max(seconds, 0.001)).toFixed(2)),
    };
  }
}
