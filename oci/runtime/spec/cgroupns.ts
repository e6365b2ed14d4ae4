// A private cgroup namespace for app containers where the node has the unified (v2) hierarchy, as containerd
// and CRI-O give one there: the container sees its own cgroup as the root of /sys/fs/cgroup. On cgroup v1 the
// container shares the node's cgroup namespace (runc mounts its own cgroups at their paths), as before.
import type { SpecOpt } from './opts.js';
import { linuxOf } from './opts.js';

export function withCgroupNamespace(privateNamespace: boolean): SpecOpt {
  return (spec) => {
    const linux = linuxOf(spec);
    const others = (linux.namespaces ?? []).filter((n) => n.type !== 'cgroup');
    linux.namespaces = privateNamespace ? [...others, { type: 'cgroup' }] : others;
  };
}
