// Which container edits a set of requested CDI devices brings, in the order they apply, and whether two of
// them contradict each other. Pure: the registry feeds in the parsed spec files.
import { InvalidArgument } from '../core/errors.js';
import type { CdiDevice, CdiEdits, CdiSpec } from './spec.js';

/** A parsed spec file and the priority of its directory (a later directory overrides an earlier one). */
export interface LoadedSpec {
  file: string;
  priority: number;
  spec: CdiSpec;
}

export interface KnownDevice {
  name: string;
  file: string;
  priority: number;
  spec: CdiSpec;
  device: CdiDevice;
}

export interface DeviceIndex {
  devices: Map<string, KnownDevice>;
  /** Names defined more than once at the highest priority they appear in, with the files defining them. */
  conflicts: Map<string, string[]>;
}

/** Every qualified name the spec files define; the same name in two files of one directory is a conflict. */
export function indexDevices(specs: readonly LoadedSpec[]): DeviceIndex {
  const devices = new Map<string, KnownDevice>();
  const conflicts = new Map<string, string[]>();
  for (const { file, priority, spec } of specs) {
    for (const device of spec.devices) {
      const name = `${spec.kind}=${device.name}`;
      const known = devices.get(name);
      if (known && known.priority === priority) {
        conflicts.set(name, [...(conflicts.get(name) ?? [known.file]), file]);
        continue;
      }
      if (known && known.priority > priority) continue;
      conflicts.delete(name);
      devices.set(name, { name, file, priority, spec, device });
    }
  }
  return { devices, conflicts };
}

/** One set of edits and who brought it: a device, or a spec file's edits for all its devices. */
export interface OwnedEdits {
  owner: string;
  edits: CdiEdits;
}

/**
 * The edits for `names`, in order: a spec file's own edits when the first of its devices comes, then that
 * device's. An unknown or conflicting name is refused, naming it and where devices were looked for.
 */
export function editsFor(
  names: readonly string[],
  index: DeviceIndex,
  dirs: readonly string[],
  unreadable: readonly string[] = [],
): OwnedEdits[] {
  const out: OwnedEdits[] = [];
  const specsSeen = new Set<CdiSpec>();
  for (const name of names) {
    const files = index.conflicts.get(name);
    if (files) {
      throw new InvalidArgument(`CDI device "${name}" is defined in more than one spec file (${files.join(', ')}): remove all but one`);
    }
    const known = index.devices.get(name);
    if (!known) {
      const also = unreadable.length > 0 ? `; spec files that could not be read: ${unreadable.join(', ')}` : '';
      throw new InvalidArgument(`CDI device "${name}" is unknown: no spec file in ${dirs.join(', ')} defines it${also}`);
    }
    if (!specsSeen.has(known.spec)) {
      specsSeen.add(known.spec);
      if (known.spec.containerEdits) out.push({ owner: `CDI spec ${known.file}`, edits: known.spec.containerEdits });
    }
    out.push({ owner: `CDI device "${name}"`, edits: known.device.containerEdits });
  }
  checkEditConflicts(out);
  return out;
}

/**
 * Two edits that put different things at the same place cannot both apply: an environment variable with
 * two values, two device nodes or two mounts at one container path that differ. The same edit twice is fine.
 */
export function checkEditConflicts(list: readonly OwnedEdits[]): void {
  const env = new Map<string, [string, string]>();
  const nodes = new Map<string, [string, string]>();
  const mounts = new Map<string, [string, string]>();
  const claim = (map: Map<string, [string, string]>, key: string, value: string, owner: string, what: string): void => {
    const had = map.get(key);
    if (had && had[0] !== value) {
      throw new InvalidArgument(`${had[1]} and ${owner} conflict: they set ${what} differently (${had[0]} and ${value})`);
    }
    map.set(key, [value, owner]);
  };
  for (const { owner, edits } of list) {
    for (const entry of edits.env ?? []) {
      const i = entry.indexOf('=');
      claim(env, entry.slice(0, i), entry.slice(i + 1), owner, `environment variable ${entry.slice(0, i)}`);
    }
    for (const d of edits.deviceNodes ?? []) {
      const what = JSON.stringify([d.hostPath ?? d.path, d.type ?? '', d.major ?? '', d.minor ?? '']);
      claim(nodes, d.path, what, owner, `device node ${d.path}`);
    }
    for (const m of edits.mounts ?? []) {
      claim(mounts, m.containerPath, JSON.stringify([m.hostPath, m.type ?? '', m.options ?? []]), owner, `the mount at ${m.containerPath}`);
    }
  }
}
