// What the kernel counts for each thread of a process (/proc/<pid>/task/<tid>/stat), for tests that tell a
// daemon's threads apart: its unpack workers are the threads Node names WorkerThread.
import { readdirSync, readFileSync } from 'node:fs';
import { parseProcStat } from '../../oci/runtime/runc-state.js';

export interface ThreadCounters {
  name: string;
  /** Page faults that needed no disk read: each a page touched for the first time (or again after it went back). */
  minorFaults: number;
  /** User and system CPU time, in clock ticks. */
  cpuTicks: number;
}

/** The counters of each thread of `pid` by tid; a thread that ends while they are read is left out. */
export function threadCounters(pid: number): Map<string, ThreadCounters> {
  const threads = new Map<string, ThreadCounters>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ESRCH') continue;
      throw err;
    }
    const { minorFaults, cpuTicks } = parseProcStat(stat);
    // The name may hold spaces and parentheses: it runs from the first '(' to the last ')'.
    threads.set(tid, { name: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), minorFaults, cpuTicks });
  }
  return threads;
}
