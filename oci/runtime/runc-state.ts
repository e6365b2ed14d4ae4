// A container's runc status read from runc's own state directory (<root>/<id>/state.json, exec.fifo)
// and /proc, by the rule runc itself applies: stopped unless the init process still lives (same start
// time, not a zombie); created while the exec fifo exists; running otherwise. No `runc state` process.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Internal } from '../../core/errors.js';
import { exists } from '../../core/fs.js';

export type RuncStatus = 'created' | 'running' | 'stopped';

export interface RuncStateFile {
  init_process_pid: number;
  /** Start time of the init process in clock ticks since boot (a number, or a string in newer runc). */
  init_process_start: number | string;
  config?: { labels?: string[] };
}

/** Process state letter, parent pid, CPU time used (user plus system) and start time, both in clock ticks, from /proc/<pid>/stat text. */
export function parseProcStat(text: string): { state: string; ppid: number; minorFaults: number; cpuTicks: number; startTime: number } {
  // The command name may hold spaces and parentheses: fields are counted from the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const cpuTicks = Number(fields[11]) + Number(fields[12]);
  return { state: fields[0] ?? '', ppid: Number(fields[1]), minorFaults: Number(fields[7]), cpuTicks, startTime: Number(fields[19]) };
}

export function runcStatus(state: RuncStateFile, procStat: string | undefined, execFifoExists: boolean): RuncStatus {
  if (!procStat || !state.init_process_pid) return 'stopped';
  const proc = parseProcStat(procStat);
  if (proc.startTime !== Number(state.init_process_start) || proc.state === 'Z' || proc.state === 'X') return 'stopped';
  return execFifoExists ? 'created' : 'running';
}

/** The bundle runc recorded as the `bundle=` label. */
export function bundleOf(state: RuncStateFile): string {
  return state.config?.labels?.find((l) => l.startsWith('bundle='))?.slice('bundle='.length) ?? '';
}

/** The container's status, pid and bundle, or undefined when runc does not know it. */
export async function readRuncState(root: string, id: string): Promise<{ status: RuncStatus; pid: number; bundle: string } | undefined> {
  let state: RuncStateFile;
  try {
    state = JSON.parse(await readFile(join(root, id, 'state.json'), 'utf8')) as RuncStateFile;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Internal(`cannot read runc state of container "${id}" in ${root}: ${(err as Error).message}`, { cause: err });
  }
  const [procStat, fifo] = await Promise.all([
    readFile(`/proc/${state.init_process_pid}/stat`, 'utf8').catch(() => undefined),
    exists(join(root, id, 'exec.fifo')),
  ]);
  const status = runcStatus(state, procStat, fifo);
  return { status, pid: status === 'stopped' ? 0 : state.init_process_pid, bundle: bundleOf(state) };
}
