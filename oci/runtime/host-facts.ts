// Gathers the node facts spec building needs (the spec functions themselves stay pure): the
// capability bounding set, host devices, AppArmor's loaded profiles, SELinux, the oom_score_adj floor,
// mountinfo, and the passwd/group files of a container's rootfs (read as rootfs-read.ts reads an image's files).
import { readdir, readFile, stat } from 'node:fs/promises';
import { release } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '../../core/log.js';
import { loadedProfiles, type ApparmorSetup } from './apparmor/loader.js';
import { KNOWN_CAPABILITIES } from './spec/capabilities.js';
import type { HostDevice, HostFacts } from './spec/index.js';
import { readOomScoreLimits } from './oom.js';
import { exists } from '../../core/fs.js';
import { readRootfsFile } from './rootfs-read.js';

/** Capability names by kernel bit number (KNOWN_CAPABILITIES lists them in that order). */
const CAPABILITY_BY_BIT = [...KNOWN_CAPABILITIES];

export function capabilitiesFromMask(hexMask: string): string[] {
  const mask = BigInt(`0x${hexMask}`);
  return CAPABILITY_BY_BIT.filter((_, bit) => (mask >> BigInt(bit)) & 1n);
}

/** Every character and block device under /dev, for privileged containers. */
async function hostDevices(dir = '/dev'): Promise<HostDevice[]> {
  const devices: HostDevice[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    // /dev/pts and /dev/shm are mounted per container; /dev/mqueue likewise.
    if (entry.isDirectory() && !['pts', 'shm', 'mqueue', 'fd'].includes(entry.name)) devices.push(...await hostDevices(path));
    else if (entry.isCharacterDevice() || entry.isBlockDevice()) {
      const st = await stat(path).catch(() => undefined);
      if (!st) continue;
      devices.push({
        path, type: entry.isCharacterDevice() ? 'c' : 'b',
        major: Number((BigInt(st.rdev) >> 8n) & 0xfffn), minor: Number((BigInt(st.rdev) & 0xffn) | ((BigInt(st.rdev) >> 12n) & 0xfff00n)),
        fileMode: st.mode & 0o7777, uid: st.uid, gid: st.gid,
      });
    }
  }
  return devices;
}

export interface NodeFacts {
  /**
   * Facts for a spec whose rootfs is `rootfs`, made from `image` (named in errors). Its /etc/passwd and
   * /etc/group are absent or regular files, or the call fails, as containerd's user lookup does: a file
   * that exists but cannot be read is an error even for a numeric user, never silently an empty one.
   */
  forRootfs(rootfs: string, image: string): Promise<HostFacts>;
}

/**
 * Reads what does not change while the daemon runs once; mountinfo, rootfs files and the loaded AppArmor
 * profiles (an operator may load one for a pod at any time) per call. `apparmor` is what start found and did.
 */
export async function gatherNodeFacts(log: Logger, apparmor: ApparmorSetup): Promise<NodeFacts> {
  const [status, oom, selinux, devices, swapAccounting] = await Promise.all([
    readFile('/proc/self/status', 'utf8'),
    readOomScoreLimits(),
    // Present whenever SELinux is enabled, enforcing or permissive.
    exists('/sys/fs/selinux/enforce'),
    hostDevices(),
    // cgroup v1 limits swap only with swap accounting on (memory.memsw.*); v2 always can.
    exists('/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes').then((v) => v || exists('/sys/fs/cgroup/cgroup.controllers')),
  ]);
  const boundingCaps = capabilitiesFromMask(/^CapBnd:\s*([0-9a-f]+)/m.exec(status)?.[1] ?? '0');
  if (oom.minAllowed > -1000) {
    log.info({ ownOomScoreAdj: oom.own, minAllowed: oom.minAllowed },
      'CAP_SYS_RESOURCE is not in the bounding set: container oom_score_adj values below the daemon\'s own are raised to it');
  }
  const kernelRelease = release();
  return {
    forRootfs: async (rootfs, image) => {
      const [mountinfo, passwd, group, profiles] = await Promise.all([
        readFile('/proc/self/mountinfo', 'utf8'),
        readRootfsFile(rootfs, '/etc/passwd', `image ${image}`),
        readRootfsFile(rootfs, '/etc/group', `image ${image}`),
        apparmor.enabled ? loadedProfiles() : undefined,
      ]);
      return {
        passwd, group, mountinfo, oomScoreAdjMin: oom.minAllowed, boundingCaps, devices,
        apparmor: profiles && {
          defaultProfile: apparmor.defaultProfile, defaultMissing: apparmor.defaultMissing, loaded: new Set(profiles.keys()),
        },
        selinux, kernelRelease, swapAccounting,
      };
    },
  };
}

