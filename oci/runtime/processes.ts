// Finding processes by name in /proc: for doctor's conmon inventory, and for tests and the bench that
// check what a run left behind. A zombie has exited (it only waits for its reaper) and is not listed.
import { readdir, readFile } from 'node:fs/promises';
import { parseProcStat } from './runc-state.js';

export interface LiveProcess {
  pid: number;
  ppid: number;
  /** The command line, without the empty entry after its last NUL. */
  argv: string[];
}

/** Live processes whose argv[0] is `name` (or ends in `/name`) and whose command line contains `needle`. */
export function liveProcesses(name: string, needle = ''): Promise<LiveProcess[]> {
  return liveProcessesWhere(({ argv }) => {
    const argv0 = argv[0] ?? '';
    return (argv0 === name || argv0.endsWith(`/${name}`)) && argv.join('\0').includes(needle);
  });
}

/** Live processes that `wanted` picks. */
export async function liveProcessesWhere(wanted: (p: LiveProcess) => boolean): Promise<LiveProcess[]> {
  const found: LiveProcess[] = [];
  for (const entry of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const [cmdline, stat] = await Promise.all([readFile(`/proc/${entry}/cmdline`, 'utf8'), readFile(`/proc/${entry}/stat`, 'utf8')]);
      const { state, ppid } = parseProcStat(stat);
      const p = { pid: Number(entry), ppid, argv: cmdline.replace(/\0$/, '').split('\0') };
      if (state !== 'Z' && wanted(p)) found.push(p);
    } catch {
      // the process went away while we looked
    }
  }
  return found;
}
