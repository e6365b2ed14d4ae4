// How long each step of something took: for one log line that explains a slow start, and for the startup
// timeline a sandbox and a container keep (verbose status, the minicri_pod_start_step_seconds histogram).

/** One finished step; a "cni-add" step names its CNI plugin and the network it is part of. */
export interface TimelineEntry {
  step: string;
  ms: number;
  plugin?: string;
  network?: string;
}

/** Milliseconds to a tenth: a CNI plugin or a runc call can take less than one. */
const tenths = (ms: number) => Math.round(ms * 10) / 10;

export class Timeline {
  private last = performance.now();
  readonly entries: TimelineEntry[] = [];

  /** Steps by name ("cni-add:bridge" for a plugin's), for a log line. */
  get ms(): Record<string, number> {
    return Object.fromEntries(this.entries.map((e) => [e.plugin ? `${e.step}:${e.plugin}` : e.step, e.ms]));
  }

  /** Closes the step that ran since the previous mark (or since the timeline began). */
  mark(step: string): void {
    const t = performance.now();
    this.add({ step, ms: t - this.last });
    this.last = t;
  }

  /** Runs `body` as a step of its own, timed from its own start: steps may run side by side. */
  async step<T>(step: string, body: () => Promise<T> | T): Promise<T> {
    const start = performance.now();
    try {
      return await body();
    } finally {
      this.last = performance.now();
      this.add({ step, ms: this.last - start });
    }
  }

  /** Adds a step timed elsewhere (a CNI plugin's ADD, timed by the CNI manager). */
  add(entry: TimelineEntry): void {
    this.entries.push({ ...entry, ms: tenths(entry.ms) });
  }
}
