// Finding processes by name in /proc: for doctor's conmon inventory, and for tests and the bench that
// check what a run left behind. A zombie has exited (it only waits for its reaper) and is not listed.
import { readdir, readFile } from 'node:fs/promises';

/** Live processes whose argv[0] is `name` (or ends in `/name`) and whose command line contains `needle`. */
export async function liveProcesses(name: string, needle = ''): Promise<{ pid: number; argv: string[] }[]> {
  const found: { pid: number; argv: string[] }[] = [];
  for (const entry of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const [cmdline, stat] = await Promise.all([readFile(`/proc/${entry}/cmdline`, 'utf8'), readFile(`/proc/${entry}/stat`, 'utf8')]);
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      const argv = cmdline.split('\0');
      const argv0 = argv[0] ?? '';
      if (state !== 'Z' && (argv0 === name || argv0.endsWith(`/${name}`)) && cmdline.includes(needle)) found.push({ pid: Number(entry), argv });
    } catch {
      // the process went away while we looked
    }
  }
  return found;
}

/** The parent pid of a process, or undefined when it is gone. */
export async function parentOf(pid: number): Promise<number | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  // After the command: state, then ppid.
  return stat ? Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) : undefined;
}
