// Finding processes by name in /proc: for doctor's conmon inventory, and for tests and the bench that
// check what a run left behind. A zombie has exited (it only waits for its reaper) and is not listed.
import { readdir, readFile } from 'node:fs/promises';
import { parseProcStat } from './runc-state.js';

/** Live processes whose argv[0] is `name` (or ends in `/name`) and whose command line contains `needle`. */
export async function liveProcesses(name: string, needle = ''): Promise<{ pid: number; ppid: number; argv: string[] }[]> {
  const found: { pid: number; ppid: number; argv: string[] }[] = [];
  for (const entry of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const [cmdline, stat] = await Promise.all([readFile(`/proc/${entry}/cmdline`, 'utf8'), readFile(`/proc/${entry}/stat`, 'utf8')]);
      const { state, ppid } = parseProcStat(stat);
      const argv = cmdline.split('\0');
      const argv0 = argv[0] ?? '';
      if (state !== 'Z' && (argv0 === name || argv0.endsWith(`/${name}`)) && cmdline.includes(needle)) {
        found.push({ pid: Number(entry), ppid, argv });
      }
    } catch {
      // the process went away while we looked
    }
  }
  return found;
}
