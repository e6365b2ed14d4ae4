// A burst of pod starts or removals leaves the heap full of its garbage, spread over pages that stay
// committed: V8 collects the old generation when it next grows, and compacts it only when memory runs
// short, so the daemon would sit on that memory while the node is quiet. So once nothing has changed
// in the records for a second, and the heap has grown to half again its smallest size yet (the daemon
// idle, or just after such a collection), one collection that also compacts (what the inspector's HeapProfiler.collectGarbage asks V8 for, here through an
// in-process session) gives it back. It holds the event loop for some tens of milliseconds, which is
// why it waits for a quiet moment and for a growth worth it, not for any change.
import { Session } from 'node:inspector';
import type { Logger } from './log.js';

const QUIET_MS = 1000;
/** Collect only when the committed heap is this many times the smallest it has been after a collection. */
const GROWTH = 1.5;

export interface QuietCollector {
  /** Something changed: collect once the daemon has been quiet for a while, if the heap has grown. */
  changed(): void;
}

/** Collects all garbage and compacts the heap, returning freed pages to the system. */
export function collectAndCompact(): Promise<void> {
  const session = new Session();
  session.connect();
  return new Promise<void>((resolve, reject) => session.post('HeapProfiler.collectGarbage', (err) => (err ? reject(err) : resolve())))
    .finally(() => session.disconnect());
}

export interface QuietCollectorOptions {
  collect?: () => Promise<void>;
  quietMs?: number;
  /** Bytes the heap has committed now. */
  heapBytes?: () => number;
}

export function quietCollector(log: Logger, opts: QuietCollectorOptions = {}): QuietCollector {
  const { collect = collectAndCompact, quietMs = QUIET_MS, heapBytes = () => process.memoryUsage().heapTotal } = opts;
  let baseline = heapBytes();
  let timer: NodeJS.Timeout | undefined;
  let running = false;
  const run = () => {
    const before = heapBytes();
    if (running || before < baseline * GROWTH) return;
    running = true;
    const started = performance.now();
    collect().then(
      () => {
        const after = heapBytes();
        // The smallest, not the last: a collection in a pause of a storm, with much still live, must not
        // keep the one after the storm from happening.
        baseline = Math.min(baseline, after);
        log.debug({ ms: Math.round(performance.now() - started), heapMiB: Math.round(after / 2 ** 20), beforeMiB: Math.round(before / 2 ** 20) }, 'quiet: heap collected and compacted');
      },
      (err: unknown) => log.warn({ err }, 'collecting the heap failed'),
    ).finally(() => { running = false; });
  };
  return {
    changed() {
      clearTimeout(timer);
      timer = setTimeout(run, quietMs).unref();
    },
  };
}
