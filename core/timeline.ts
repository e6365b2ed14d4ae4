// How long each step of something took, for one log line that explains a slow start.
export class Timeline {
  private last = performance.now();
  readonly ms: Record<string, number> = {};

  /** Closes the step that ran since the previous mark (or since the timeline began). */
  mark(step: string): void {
    const t = performance.now();
    this.ms[step] = Math.round(t - this.last);
    this.last = t;
  }

  /** Runs `body` as a step of its own. */
  async step<T>(step: string, body: () => Promise<T> | T): Promise<T> {
    this.last = performance.now();
    try {
      return await body();
    } finally {
      this.mark(step);
    }
  }
}
