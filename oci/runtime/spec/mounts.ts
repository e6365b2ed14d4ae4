// Mounts: the kernel filesystems every container gets, the pod's files, CRI bind mounts with
// their propagation, and image volumes.
import path from 'node:path';
import { Internal, InvalidArgument } from '../../../core/errors.js';
import { ensureShared, ensureSharedOrSlave, type MountInfo } from './mountinfo.js';
import type { SpecOpt } from './opts.js';
import { linuxOf } from './opts.js';
import type { Mount } from './types.js';

/** The CRI Mount fields we read (gen's Mount__Output satisfies it). */
export interface CriMount {
  container_path: string;
  host_path: string;
  readonly: boolean;
  propagation: string;
  recursive_read_only?: boolean;
  /** OCI image volume sources: mounted by the edge and added by withImageVolumes, not here. */
  image?: { image: string } | null;
}

export const DEV_SHM = '/dev/shm';

/** A path in canonical form for comparing mount targets: normalised, no trailing slash. */
export const cleanPath = (p: string): string => path.posix.normalize(p).replace(/(.)\/+$/, '$1');

/**
 * The kernel filesystems a container needs. /sys and /sys/fs/cgroup are read-only: only a
 * privileged container may write to them (withWritableSysfs). /dev/shm is a private tmpfs until a
 * pod-wide one replaces it.
 */
export function defaultMounts(): Mount[] {
  return [
    { destination: '/proc', type: 'proc', source: 'proc', options: ['nosuid', 'noexec', 'nodev'] },
    { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'] },
    {
      destination: '/dev/pts', type: 'devpts', source: 'devpts',
      options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620', 'gid=5'],
    },
    { destination: '/dev/mqueue', type: 'mqueue', source: 'mqueue', options: ['nosuid', 'noexec', 'nodev'] },
    { destination: DEV_SHM, type: 'tmpfs', source: 'shm', options: ['nosuid', 'noexec', 'nodev', 'mode=1777', 'size=65536k'] },
    { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
    { destination: '/sys/fs/cgroup', type: 'cgroup', source: 'cgroup', options: ['nosuid', 'noexec', 'nodev', 'relatime', 'ro'] },
  ];
}

/** The top-level directories the default mounts go on: a root filesystem holding them needs no mkdir by runc. */
export function defaultMountRoots(): string[] {
  return [...new Set(defaultMounts().map((m) => `/${m.destination.split('/')[1]}`))];
}

export function withDefaultMounts(): SpecOpt {
  return (spec) => { spec.mounts = defaultMounts(); };
}

/** Privileged containers may write to sysfs and cgroupfs. */
export function withWritableSysfs(): SpecOpt {
  return (spec) => {
    for (const m of spec.mounts ?? []) {
      if (m.type === 'sysfs' || m.type === 'cgroup') m.options = (m.options ?? []).filter((o) => o !== 'ro');
    }
  };
}

/** Replaces the private /dev/shm tmpfs by a read-only bind of the pod's (the pause container's). */
export function withPodShm(shmPath: string | undefined): SpecOpt {
  return (spec) => {
    if (!shmPath) return;
    spec.mounts = (spec.mounts ?? []).filter((m) => m.destination !== DEV_SHM);
    spec.mounts.push({ destination: DEV_SHM, type: 'bind', source: shmPath, options: ['rbind', 'ro', 'nosuid', 'nodev', 'noexec'] });
  };
}

export function withReadonlyRootfs(readonly: boolean): SpecOpt {
  return (spec) => { if (spec.root) spec.root.readonly = readonly; };
}

export interface PodFiles {
  hostsPath?: string;
  resolvPath?: string;
  hostnamePath?: string;
  /** The pod's /dev/shm; the host's own when the pod uses the host IPC namespace. */
  shmPath?: string;
}

/**
 * The pod-wide files a container sees, as CRI mounts so they follow the same rules. A file the
 * CRI config already mounts (kubelet manages /etc/hosts itself) is left to the config. They are
 * read-only when the container's rootfs is, so readonly_rootfs really means nothing is writable.
 */
export function podFileMounts(files: PodFiles, configMounts: readonly CriMount[], readonlyRootfs: boolean): CriMount[] {
  const taken = new Set(configMounts.map((m) => cleanPath(m.container_path)));
  const wanted: Array<[string, string | undefined, boolean]> = [
    ['/etc/hostname', files.hostnamePath, readonlyRootfs],
    ['/etc/hosts', files.hostsPath, readonlyRootfs],
    ['/etc/resolv.conf', files.resolvPath, readonlyRootfs],
    [DEV_SHM, files.shmPath, false],
  ];
  return wanted
    .filter(([target, source]) => source && !taken.has(target))
    .map(([target, source, readonly]) => ({
      container_path: target,
      host_path: source as string,
      readonly,
      propagation: 'PROPAGATION_PRIVATE',
    }));
}

/**
 * Anonymous volumes for the image's declared Volumes that no CRI mount covers. The caller
 * creates a host directory per volume (see imageVolumesToCreate) and passes them in `dirs`.
 */
export function imageVolumesToCreate(volumes: readonly string[], configMounts: readonly CriMount[]): string[] {
  const taken = new Set(configMounts.map((m) => cleanPath(m.container_path)));
  return [...new Set(volumes.map(cleanPath))].filter((v) => !taken.has(v));
}

export function imageVolumeMounts(
  volumes: readonly string[],
  configMounts: readonly CriMount[],
  dirs: Readonly<Record<string, string>>,
): CriMount[] {
  return imageVolumesToCreate(volumes, configMounts).map((v) => {
    const dir = dirs[v];
    if (!dir) throw new Internal(`no host directory was prepared for image volume "${v}"`);
    return { container_path: v, host_path: dir, readonly: false, propagation: 'PROPAGATION_PRIVATE' };
  });
}

export interface BindMountContext {
  mountinfo: readonly MountInfo[];
  /** The runtime and kernel support "rro" (runc >= 1.1 on Linux >= 5.12). */
  recursiveReadOnly: boolean;
}

function bindOptions(m: CriMount, ctx: BindMountContext): { options: string[]; rootfs?: 'rshared' | 'rslave' } {
  const options = ['rbind'];
  let rootfs: 'rshared' | 'rslave' | undefined;
  switch (m.propagation) {
    case 'PROPAGATION_PRIVATE':
      options.push('rprivate');
      break;
    case 'PROPAGATION_BIDIRECTIONAL':
      ensureShared(m.host_path, ctx.mountinfo);
      options.push('rshared');
      rootfs = 'rshared';
      break;
    case 'PROPAGATION_HOST_TO_CONTAINER':
      ensureSharedOrSlave(m.host_path, ctx.mountinfo);
      options.push('rslave');
      rootfs = 'rslave';
      break;
    default:
      throw new InvalidArgument(`mount "${m.container_path}" has unknown propagation "${m.propagation}"`);
  }
  if (m.recursive_read_only) {
    if (!m.readonly) {
      throw new InvalidArgument(`mount "${m.container_path}" asks for recursive read-only but is not read-only: set readonly too`);
    }
    if (m.propagation !== 'PROPAGATION_PRIVATE') {
      throw new InvalidArgument(
        `mount "${m.container_path}" asks for recursive read-only with propagation: recursive read-only needs private propagation`,
      );
    }
    if (!ctx.recursiveReadOnly) {
      throw new InvalidArgument(
        `mount "${m.container_path}" asks for recursive read-only, which this host's kernel or runc does not support`,
      );
    }
    options.push('rro');
  } else {
    options.push(m.readonly ? 'ro' : 'rw');
  }
  return { options, rootfs };
}

const depth = (p: string): number => p.split('/').filter((c) => c !== '').length;

/**
 * Adds CRI bind mounts. Default mounts on the same target (or anything under /dev when /dev itself
 * is mounted) give way; parents are mounted before their children. The rootfs propagation is the
 * strongest one any mount needs, since a shared/slave mount under a private root propagates
 * nothing. selinux_relabel is ignored (no SELinux here). A mount's uid/gid mappings (a user-namespaced
 * pod's, checked by checkUsernsMounts) are not runc's to apply: the edge stages the id-mapped copy.
 */
export function withBindMounts(mounts: readonly CriMount[], ctx: BindMountContext): SpecOpt {
  return (spec) => {
    const built: Mount[] = [];
    let propagation: 'rshared' | 'rslave' | undefined;
    for (const m of mounts) {
      if (m.image?.image) {
        throw new InvalidArgument(
          `mount "${m.container_path}" uses image "${m.image.image}" as its source: image volumes are not supported by this runtime`,
        );
      }
      if (!path.posix.isAbsolute(m.container_path)) {
        throw new InvalidArgument(`mount target "${m.container_path}" is not absolute: use a path such as /data`);
      }
      if (!path.posix.isAbsolute(m.host_path)) {
        throw new InvalidArgument(`mount source "${m.host_path}" for "${m.container_path}" is not an absolute host path`);
      }
      const { options, rootfs } = bindOptions(m, ctx);
      if (rootfs === 'rshared' || (rootfs === 'rslave' && propagation !== 'rshared')) propagation = rootfs;
      built.push({ destination: cleanPath(m.container_path), type: 'bind', source: m.host_path, options });
    }
    const targets = new Set(built.map((m) => m.destination));
    const kept = (spec.mounts ?? []).filter((m) => {
      const dst = cleanPath(m.destination);
      return !targets.has(dst) && !(targets.has('/dev') && dst.startsWith('/dev/'));
    });
    // A stable sort keeps the config's order among mounts of equal depth.
    built.sort((a, b) => depth(a.destination) - depth(b.destination));
    spec.mounts = [...kept, ...built];
    if (propagation) linuxOf(spec).rootfsPropagation = propagation;
  };
}
