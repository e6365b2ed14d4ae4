// CDI container edits applied to the spec, in the order given, after everything the CRI config asked for:
// environment variables (a later value of a name replaces the earlier one in place), device nodes with their
// device cgroup rule, mounts (one at the same destination is replaced; parents stay before children), hooks,
// additional gids (0 and repeats ignored) and Intel RDT. Device nodes arrive completed from the host.
// Network devices (CDI 1.1 netDevices) are not applied here: one owner per device, and that owner is the CNI
// plugin of the DRA-backed secondary network that moves it into the pod at RunPodSandbox (see the README).
import path from 'node:path';
import { InvalidArgument } from '../../../core/errors.js';
import type { CdiEdits } from '../../../cdi/spec.js';
import type { SpecOpt } from './opts.js';
import { linuxOf, processOf, resourcesOf } from './opts.js';
import type { Mount } from './types.js';

export interface CdiEditsToApply {
  owner: string;
  edits: CdiEdits;
}

export function withCdiEdits(list: readonly CdiEditsToApply[]): SpecOpt {
  return (spec) => {
    for (const { owner, edits } of list) {
      if (edits.env?.length) {
        const env = processOf(spec).env ??= [];
        for (const entry of edits.env) {
          const key = entry.slice(0, entry.indexOf('='));
          const at = env.findIndex((e) => e.slice(0, e.indexOf('=')) === key);
          if (at >= 0) env[at] = entry;
          else env.push(entry);
        }
      }
      for (const d of edits.deviceNodes ?? []) {
        if (!d.type || (d.type !== 'p' && (d.major === undefined || d.minor === undefined))) {
          throw new InvalidArgument(`${owner}: device node ${d.path} has no type or device numbers`);
        }
        const linux = linuxOf(spec);
        linux.devices = (linux.devices ?? []).filter((x) => x.path !== d.path);
        linux.devices.push({
          path: d.path, type: d.type, major: d.major ?? 0, minor: d.minor ?? 0,
          ...(d.fileMode !== undefined ? { fileMode: d.fileMode } : {}),
          ...(d.uid !== undefined ? { uid: d.uid } : {}),
          ...(d.gid !== undefined ? { gid: d.gid } : {}),
        });
        if (d.type === 'b' || d.type === 'c') {
          const resources = resourcesOf(spec);
          (resources.devices ??= []).push({ allow: true, type: d.type, major: d.major, minor: d.minor, access: d.permissions || 'rwm' });
        }
      }
      if (edits.mounts?.length) {
        const mounts = (spec.mounts ?? []).filter(
          (m) => !edits.mounts!.some((c) => path.posix.resolve(c.containerPath) === path.posix.resolve(m.destination)),
        );
        for (const m of edits.mounts) {
          const mount: Mount = { destination: m.containerPath, source: m.hostPath, options: [...(m.options ?? [])] };
          if (m.type) mount.type = m.type;
          mounts.push(mount);
        }
        spec.mounts = sortByDepth(mounts);
      }
      for (const h of edits.hooks ?? []) {
        const hooks = spec.hooks ??= {};
        (hooks[h.hookName] ??= []).push({
          path: h.path,
          ...(h.args ? { args: [...h.args] } : {}), ...(h.env ? { env: [...h.env] } : {}), ...(h.timeout ? { timeout: h.timeout } : {}),
        });
      }
      if (edits.additionalGids?.length) {
        const user = processOf(spec).user;
        const gids = user.additionalGids ??= [];
        for (const gid of edits.additionalGids) if (gid !== 0 && !gids.includes(gid)) gids.push(gid);
      }
      if (edits.intelRdt) linuxOf(spec).intelRdt = { ...edits.intelRdt };
    }
  };
}

/** Stable: mounts of equal depth keep their order, and a mount comes after those of its parents. */
function sortByDepth(mounts: Mount[]): Mount[] {
  const depth = (m: Mount): number => path.posix.resolve(m.destination).split('/').filter(Boolean).length;
  return mounts.map((m, i) => [m, i] as const).sort((a, b) => depth(a[0]) - depth(b[0]) || a[1] - b[1]).map(([m]) => m);
}
