// Process accounting from /proc: memory (RSS and PSS) and CPU time of a daemon and its helper processes.
import { readFile } from 'node:fs/promises';
import { parseProcStat } from '../../oci/runtime/runc-state.js';

const CLOCK_TICKS = 100; // USER_HZ on Linux x86-64

export interface Memory {
  rssKiB: number;
  pssKiB: number;
}

/** RSS and PSS of one process (PSS shares a page among the processes that map it: honest for 110 shims). */
export async function memoryOf(pid: number): Promise<Memory> {
  const text = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8').catch(() => '');
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0);
  return { rssKiB: field('Rss'), pssKiB: field('Pss') };
}

export async function sumMemory(pids: readonly number[]): Promise<Memory> {
  const all = await Promise.all(pids.map(memoryOf));
  return { rssKiB: all.reduce((a, m) => a + m.rssKiB, 0), pssKiB: all.reduce((a, m) => a + m.pssKiB, 0) };
}

/** User plus system CPU seconds the process has used. */
export async function cpuSeconds(pid: number): Promise<number> {
  return parseProcStat(await readFile(`/proc/${pid}/stat`, 'utf8')).cpuTicks / CLOCK_TICKS;
}

/** Percent of one core the process used over `ms`. */
export async function cpuPercent(pid: number, ms: number): Promise<number> {
  const before = await cpuSeconds(pid);
  await new Promise((r) => setTimeout(r, ms));
  return ((await cpuSeconds(pid)) - before) / (ms / 1000) * 100;
}

/** Whether the process is gone or a zombie (exited, waiting for its reaper). */
export async function exited(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  return stat === '' || parseProcStat(stat).state === 'Z';
}
