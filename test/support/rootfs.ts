// A busybox root filesystem for tests: /bin/busybox from the host plus one symlink per applet, and
// the empty mount points an OCI runtime expects. Debian's busybox-static is the intended source (its
// sh runs applets as builtins without PATH lookup); if the host has the dynamically linked `busybox`
// package instead, the shared libraries it needs are copied in as well so the rootfs still works.
import { copyFile, mkdir, symlink, chmod } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { execa } from 'execa';

export const HOST_BUSYBOX = '/bin/busybox';

let hostInfo: Promise<{ applets: string[]; libs: string[] }> | undefined;

async function inspectHostBusybox(): Promise<{ applets: string[]; libs: string[] }> {
  const list = await execa(HOST_BUSYBOX, ['--list']);
  const applets = list.stdout.split('\n').map((s) => s.trim()).filter((s) => s && s !== 'busybox');
  // ldd fails with "not a dynamic executable" for a static binary: then there is nothing to copy.
  const ldd = await execa('ldd', [HOST_BUSYBOX], { reject: false });
  const libs = ldd.exitCode !== 0 ? [] : [...ldd.stdout.matchAll(/(\/\S+) \(0x[0-9a-f]+\)/g)].map((m) => m[1]!);
  return { applets, libs };
}

/** Lay out a busybox rootfs in `dir` (created). Extra files are copied in as { '/path/in/rootfs': hostPath }. */
export async function makeBusyboxRootfs(dir: string, extra: Record<string, string> = {}): Promise<void> {
  hostInfo ??= inspectHostBusybox();
  const { applets, libs } = await hostInfo;
  for (const d of ['bin', 'proc', 'sys', 'dev', 'tmp', 'etc', 'root', 'run']) await mkdir(join(dir, d), { recursive: true });
  await chmod(join(dir, 'tmp'), 0o1777);
  await copyFile(HOST_BUSYBOX, join(dir, 'bin', 'busybox'));
  await Promise.all(applets.map((a) => symlink('busybox', join(dir, 'bin', a))));
  const files: [string, string][] = [...libs.map((l): [string, string] => [l, l]), ...Object.entries(extra)];
  for (const [inside, host] of files) {
    const target = join(dir, inside);
    await mkdir(dirname(target), { recursive: true });
    await copyFile(host, target); // follows symlinks: the rootfs gets the real file
    await chmod(target, 0o755);
  }
}
