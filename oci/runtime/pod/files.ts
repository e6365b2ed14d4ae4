// The files a pod shares with its containers: hostname, resolv.conf, hosts, and a private /dev/shm.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { DNSConfig__Output } from '../../../gen/runtime/v1/DNSConfig.js';
import { MS, mount, unmountIfMounted } from '../../../mounter/mounter.js';

/** The pod's resolv.conf: the DNS config kubelet computed, or the host's when it gave none. */
export function resolvConf(dns: DNSConfig__Output | null | undefined, hostResolv: string): string {
  if (!dns || (dns.servers.length === 0 && dns.searches.length === 0 && dns.options.length === 0)) return hostResolv;
  const lines = [
    ...(dns.searches.length ? [`search ${dns.searches.join(' ')}`] : []),
    ...dns.servers.map((s) => `nameserver ${s}`),
    ...(dns.options.length ? [`options ${dns.options.join(' ')}`] : []),
  ];
  return `${lines.join('\n')}\n`;
}

/** The pod's hosts file: the host's own for host-network pods, else just the loopback names. */
export function hostsFile(hostNetwork: boolean, hostHosts: string): string {
  if (hostNetwork) return hostHosts;
  return [
    '127.0.0.1\tlocalhost',
    '::1\tlocalhost ip6-localhost ip6-loopback',
    'fe00::0\tip6-localnet',
    'fe00::0\tip6-mcastprefix',
    'fe00::1\tip6-allnodes',
    'fe00::2\tip6-allrouters',
    '',
  ].join('\n');
}

export interface PodFiles {
  hostname: string;
  resolvConf: string;
  hosts: string;
  /** The pod's /dev/shm mount point, absent when the pod uses the host's IPC namespace. */
  shm?: string;
}

/** Writes the pod's files under `dir`; returns their paths. */
export async function writePodFiles(
  dir: string,
  content: { hostname: string; resolvConf: string; hosts: string },
): Promise<Omit<PodFiles, 'shm'>> {
  await mkdir(dir, { recursive: true, mode: 0o755 });
  const paths = { hostname: join(dir, 'hostname'), resolvConf: join(dir, 'resolv.conf'), hosts: join(dir, 'hosts') };
  await Promise.all([
    writeFile(paths.hostname, `${content.hostname}\n`, { mode: 0o644 }),
    writeFile(paths.resolvConf, content.resolvConf, { mode: 0o644 }),
    writeFile(paths.hosts, content.hosts, { mode: 0o644 }),
  ]);
  return paths;
}

/** kubelet and containerd give pods a 64 MiB /dev/shm. */
const SHM_BYTES = 64 * 1024 * 1024;

/**
 * The shm tmpfs's mount data. A user-namespaced pod's (`owner`: its root on the host) is that root's from the
 * start, so its containers get it as a plain bind: tmpfs cannot be id-mapped before Linux 6.3. Pure.
 */
export function podShmData(owner?: { uid: number; gid: number }): string {
  return `mode=1777,size=${SHM_BYTES}${owner ? `,uid=${owner.uid},gid=${owner.gid}` : ''}`;
}

export async function mountPodShm(path: string, owner?: { uid: number; gid: number }): Promise<void> {
  await mkdir(path, { recursive: true, mode: 0o1777 });
  await mount({ source: 'shm', target: path, fstype: 'tmpfs', flags: MS.NOSUID | MS.NODEV | MS.NOEXEC, data: podShmData(owner) });
}

/** Unmounts the pod's shm; a path that is not mounted (or gone) is fine. */
export async function unmountPodShm(path: string): Promise<void> {
  await unmountIfMounted(path);
}
