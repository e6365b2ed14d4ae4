// UpdatePodSandboxResources: kubelet tells the runtime the pod's new resources after it resized the pod cgroup.
// Kept in the sandbox's config and written to the pod cgroup, best effort as the CRI specifies: a limit the
// kernel refuses is logged, not returned.
import type { Logger } from '../core/log.js';
import type { LinuxContainerResources__Output } from '../gen/runtime/v1/LinuxContainerResources.js';
import { applyPodCgroupLimits, podCgroupLimits } from '../oci/runtime/pod-cgroup.js';
import { podCgroupParentDir } from '../oci/runtime/cgroups.js';
import { linuxResources } from '../oci/runtime/spec/resources.js';
import type { PodContext } from './context.js';

export async function updateSandboxResources(
  ctx: PodContext,
  idOrPrefix: string,
  overhead: LinuxContainerResources__Output | null,
  resources: LinuxContainerResources__Output | null,
  log: Logger,
): Promise<void> {
  // Out-of-range values are refused as for a container (InvalidArgument naming the field).
  if (resources) linuxResources(resources);
  if (overhead) linuxResources(overhead);
  const { id } = ctx.tables.sandboxes.find(idOrPrefix);
  await ctx.locks.run(id, async () => {
    const record = ctx.tables.sandboxes.get(id);
    if (!record) return;
    const parent = record.config.linux?.cgroup_parent ?? '';
    ctx.tables.sandboxes.update(id, (r) => {
      if (r.config.linux) {
        r.config.linux = {
          ...r.config.linux,
          overhead: overhead ?? r.config.linux.overhead,
          resources: resources ?? r.config.linux.resources,
        };
      }
    });
    // Without a pod cgroup of kubelet's, the parent is minicri's own, shared by every pod: nothing to size.
    if (!parent) {
      log.debug({ sandboxId: id }, 'sandbox has no pod cgroup: resources recorded only');
      return;
    }
    const failures = await applyPodCgroupLimits(
      podCgroupParentDir(ctx.settings.cgroup_driver, parent),
      podCgroupLimits(resources, overhead),
    );
    if (failures.length > 0) log.warn({ sandboxId: id, failures }, 'some pod cgroup limits could not be written (best effort)');
    else log.info({ sandboxId: id }, 'sandbox resources updated');
  });
}
