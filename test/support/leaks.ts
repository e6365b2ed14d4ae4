// What a test run may leave on the host: network namespaces, mounts, conmon processes, runc state.
// Tests take a snapshot before and assert the same after, so a leak fails the test that made it.
import { readdir, readFile } from 'node:fs/promises';
import { liveProcesses } from '../../oci/runtime/processes.js';

export interface HostSnapshot {
  netns: string[];
  conmon: string[];
  mounts: string[];
}

/**
 * conmon processes still running. An exited conmon is reparented to PID 1 and stays a zombie until
 * PID 1 reaps it, which some VMs' init does late: a zombie holds nothing and is not a leak.
 */
async function liveConmons(): Promise<string[]> {
  return (await liveProcesses('conmon')).map((p) => String(p.pid));
}

export async function hostSnapshot(): Promise<HostSnapshot> {
  const [netns, conmon, mounts] = await Promise.all([
    readdir('/var/run/netns').catch(() => [] as string[]),
    liveConmons(),
    readFile('/proc/self/mounts', 'utf8').then((t) => t.split('\n').map((l) => l.split(' ')[1] ?? '')
      .filter((m) => m.includes('minicri') || /^\/(var\/)?run\/netns\/./.test(m))),
  ]);
  return { netns: netns.sort(), conmon: conmon.sort(), mounts: mounts.sort() };
}

/** Fails when the host holds anything the snapshot did not. */
export async function assertNothingLeft(before: HostSnapshot, what = 'the test'): Promise<void> {
  const after = await hostSnapshot();
  const extra = (k: keyof HostSnapshot) => after[k].filter((x) => !before[k].includes(x));
  const leaks = { netns: extra('netns'), conmon: extra('conmon'), mounts: extra('mounts') };
  if (leaks.netns.length || leaks.conmon.length || leaks.mounts.length) {
    throw new Error(`${what} left behind: ${JSON.stringify(leaks)}`);
  }
}
