// cgroupsPath for runc: a path under the pod's parent for the cgroupfs driver, and systemd's
// "slice:prefix:name" form (a transient scope in the pod's slice) for the systemd driver.
import path from 'node:path';
import { InvalidArgument } from '../../../core/errors.js';
import type { SpecOpt } from './opts.js';
import { linuxOf } from './opts.js';

export type CgroupDriver = 'cgroupfs' | 'systemd';

/** Scope name prefix under systemd: the scope is "<prefix>-<id>.scope". */
export const SYSTEMD_SCOPE_PREFIX = 'minicri';

/** Where pods without a cgroup_parent go (kubelet normally always sends one). */
export const DEFAULT_CGROUPFS_PARENT = '/minicri';
export const DEFAULT_SYSTEMD_PARENT = 'system.slice';

const ID = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

export function cgroupsPath(driver: CgroupDriver, parent: string, id: string): string {
  if (!ID.test(id)) throw new InvalidArgument(`id "${id}" cannot name a cgroup: use letters, digits, "_", "." and "-"`);
  if (driver === 'systemd') {
    // kubelet passes the slice name; a full path to it is accepted and reduced to its name.
    const slice = parent === '' ? DEFAULT_SYSTEMD_PARENT : path.posix.basename(parent);
    if (!/^[A-Za-z0-9:_.\\-]+\.slice$/.test(slice) || slice.includes('..')) {
      throw new InvalidArgument(
        `cgroup parent "${parent}" is not a systemd slice: ` +
          'with the systemd cgroup driver use a name such as kubepods-besteffort-pod123.slice',
      );
    }
    return `${slice}:${SYSTEMD_SCOPE_PREFIX}:${id}`;
  }
  const dir = parent === '' ? DEFAULT_CGROUPFS_PARENT : parent;
  if (!dir.startsWith('/') || dir.split('/').includes('..')) {
    throw new InvalidArgument(`cgroup parent "${parent}" must be an absolute path without "..": use e.g. /kubepods/besteffort/pod123`);
  }
  if (dir.endsWith('.slice')) {
    throw new InvalidArgument(
      `cgroup parent "${parent}" is a systemd slice but the runtime uses the cgroupfs driver: configure kubelet with cgroupDriver cgroupfs`,
    );
  }
  return path.posix.join(dir, id);
}

export function withCgroupsPath(driver: CgroupDriver, parent: string, id: string): SpecOpt {
  const p = cgroupsPath(driver, parent, id);
  return (spec) => { linuxOf(spec).cgroupsPath = p; };
}
