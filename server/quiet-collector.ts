// A burst of pod starts or removals leaves the heap full of its garbage, spread over pages that stay
// committed: V8 collects the old generation when it next grows, and compacts it only when memory runs
// short, so the daemon would sit on that memory while the node is quiet. So once nothing has changed
// in the records for a second, one collection that also compacts (what the inspector's
// HeapProfiler.collectGarbage asks V8 for, here through an in-process session) gives it back.
import { Session } from 'node:inspector';
import type { Logger } from './log.js';

const QUIET_MS = 1000;

export interface QuietCollector {
  /** Something changed: collect once the daemon has been quiet for a while. */
  changed(): void;
}

/** Collects all garbage and compacts the heap, returning freed pages to the system. */
export function collectAndCompact(): Promise<void> {
  const session = new Session();
  session.connect();
  return new Promise<void>((resolve, reject) => session.post('HeapProfiler.collectGarbage', (err) => (err ? reject(err) : resolve())))
    .finally(() => session.disconnect());
}

export function quietCollector(log: Logger, collect: () => Promise<void> = collectAndCompact, quietMs = QUIET_MS): QuietCollector {
  let timer: NodeJS.Timeout | undefined;
  const run = () => {
    const before = process.memoryUsage().heapTotal;
    collect().then(
      () => log.debug({ heapMiB: Math.round(process.memoryUsage().heapTotal / 2 ** 20), beforeMiB: Math.round(before / 2 ** 20) }, 'quiet: heap collected and compacted'),
      (err: unknown) => log.warn({ err }, 'collecting the heap failed'),
    );
  };
  return {
    changed() {
      clearTimeout(timer);
      timer = setTimeout(run, quietMs).unref();
    },
  };
}
