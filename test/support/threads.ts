// What the kernel counts for each thread of a process (/proc/<pid>/task/<tid>/stat), for tests that tell a
// daemon's threads apart: its unpack workers are the threads Node names WorkerThread.
import { readdirSync, readFileSync } from 'node:fs';

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
    // The name may hold spaces and parentheses: the fields are what follows its last ')'. fields[0] is field 3.
    const fields = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
    threads.set(tid, {
      name: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')),
      minorFaults: Number(fields[7]),
      cpuTicks: Number(fields[11]) + Number(fields[12]),
    });
  }
  return threads;
}
