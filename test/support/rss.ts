// A process's resident memory as the kernel reports it (VmRSS in /proc/<pid>/status), for tests that bound it.
import { readFileSync } from 'node:fs';

/** VmRSS of `pid` (this process by default) in bytes; throws when the process is gone. */
export function rssBytes(pid: number | 'self' = 'self'): number {
  const kB = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  if (kB === undefined) throw new Error(`/proc/${pid}/status has no VmRSS line`);
  return Number(kB) * 1024;
}
