// A burst of pod starts or removals leaves the heap full of its garbage, spread over pages that stay
// committed: V8 collects the old generation when it next grows, and compacts it only when memory runs
// short, so the daemon would sit on that memory while the node is quiet. So a second after the last
// change to the records, once no operation is under way, one collection that also compacts gives it back:
// what the inspector's HeapProfiler.collectGarbage asks V8 for, here through an in-process session.
// It holds the event loop for some tens of milliseconds, hence the wait for a quiet, idle moment, and
// only when the heap has grown to half again what it was after the last such collection.
import { Session } from 'node:inspector';
import type { Logger } from '../core/log.js';

const QUIET_MS = 1000;
const GROWTH = 1.5;

export interface QuietCollector {
  /** Something changed: collect once the daemon has been quiet for a while, if the heap has grown. */
  changed(): void;
}

/** Collects all garbage and compacts the heap, returning freed pages to the system. */
export async function collectAndCompact(): Promise<void> {
  const session = new Session();
  session.connect();
  try {
    await new Promise<void>((resolve, reject) => session.post('HeapProfiler.collectGarbage', (err) => (err ? reject(err) : resolve())));
  } finally {
    session.disconnect();
  }
}

export interface QuietCollectorOptions {
  /** Whether an operation is under way (its garbage is still live, and it should not be held up). */
  busy: () => boolean;
  collect?: () => Promise<void>;
  quietMs?: number;
  /** Bytes the heap has committed now. */
  heapBytes?: () => number;
}

export function quietCollector(log: Logger, opts: QuietCollectorOptions): QuietCollector {
  const { busy, collect = collectAndCompact, quietMs = QUIET_MS, heapBytes = () => process.memoryUsage().heapTotal } = opts;
  /** The heap after the last collection (none yet: the first quiet moment collects). */
  let baseline: number | undefined;
  let timer: NodeJS.Timeout | undefined;
  let running = false;
  const run = async () => {
    const before = heapBytes();
    if (running || (baseline !== undefined && before < baseline * GROWTH)) return;
    // An operation under way: try again a quiet period later, as a burst's last RPC may still be running.
    if (busy()) {
      timer = setTimeout(run, quietMs).unref();
      return;
    }
    running = true;
    const started = performance.now();
    try {
      await collect();
      baseline = heapBytes();
      const mib = (bytes: number) => Math.round(bytes / 2 ** 20);
      log.debug(
        { ms: Math.round(performance.now() - started), heapMiB: mib(baseline), beforeMiB: mib(before) },
        'quiet: heap collected and compacted',
      );
    } catch (err) {
      log.warn({ err }, 'collecting the heap failed');
    } finally {
      running = false;
    }
  };
  return {
    changed() {
      clearTimeout(timer);
      timer = setTimeout(run, quietMs).unref();
    },
  };
}
