// Where the root filesystems of user-namespaced containers are staged. runc makes the container's root
// mount from inside the new user namespace, as the pod's root (an unprivileged id on the host), so every
// directory above it must be searchable by others: root_dir and state_dir are root's alone (0700). The
// staging dir sits beside state_dir (mode 0711, not listable); each container's entry in it is 0700 and
// owned by that pod's root, so no other pod can enter it. An entry lives only from the spec's writing
// until `runc create` has made the container's own copy of the mounts.
import { resolve } from 'node:path';

export function usernsStagingDir(stateDir: string): string {
  return `${resolve(stateDir)}-userns`;
}
