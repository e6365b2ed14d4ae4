// Image volumes (Mount.image): each image used as a volume gets one read-only view on the host, shared by every
// container using it, mounted when the first needs it and removed when the last of them is removed. The
// records say who uses which, so RemoveImage, recovery and doctor know the view is in use. A user-namespaced
// pod's view is an overlay of id-mapped layers with the pod's mappings (as containerd prepares its snapshot
// with them), one per mapping: its files show their image owners inside the pod.
import { stat } from 'node:fs/promises';
import { InvalidArgument } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Mount__Output } from '../gen/runtime/v1/Mount.js';
import { resolveInRoot } from '../oci/runtime/rootfs-read.js';
import { imageSubPath, type ImageVolumeMount, type PodUserns } from '../oci/runtime/spec/index.js';
import type { PodContext } from './context.js';
import type { ContainerRecord, ImageVolumeUse } from './records.js';

/**
 * The rootfs key of an image's shared volume view: one per image, and for user-namespaced pods one per image
 * and mapping (pods of the same mapping share it). Pure.
 */
export function imageVolumeKey(imageId: string, userns?: PodUserns): string {
  const hex = imageId.replace(/^sha256:/, '');
  if (!userns) return `imgvol-${hex}`;
  const [u, g] = [userns.uids[0]!, userns.gids[0]!];
  return `imgvol-${hex}-u${u.hostId}x${u.size}-g${g.hostId}x${g.size}`;
}

/**
 * A container's image mounts, checked before anything is made: the image must be pulled, the sub path inside it.
 * `userns` is the pod's user namespace, whose mappings the view takes.
 */
export function imageVolumeUses(ctx: PodContext, mounts: readonly Mount__Output[], userns?: PodUserns): ImageVolumeUse[] {
  return mounts.filter((m) => m.image?.image).map((m) => {
    const name = m.image!.image;
    // NotFound naming the image when kubelet did not pull it.
    const image = ctx.images.resolve(name);
    return {
      key: imageVolumeKey(image.id, userns),
      imageId: image.id,
      image: name,
      containerPath: m.container_path,
      subPath: imageSubPath(m.image_sub_path, name),
    };
  });
}

/**
 * Mounts (or finds mounted) each volume's shared view and returns the bind mounts for the spec. The caller
 * has put the container's record, with its uses, in the table first: a release racing this one then sees it.
 * A user-namespaced pod's view stacks id-mapped mounts of the layers (its key names the mapping).
 */
export async function mountImageVolumes(ctx: PodContext, uses: readonly ImageVolumeUse[], userns?: PodUserns): Promise<ImageVolumeMount[]> {
  const out: ImageVolumeMount[] = [];
  for (const use of uses) {
    const view = await ctx.locks.run(use.key, () => ctx.images.prepareRootfs(use.key, use.imageId, userns ? { idmap: userns } : {}));
    const source = use.subPath ? await resolveInRoot(view.path, use.subPath, `image volume ${use.image}`) : view.path;
    const st = await stat(source).catch(() => undefined);
    if (!st?.isDirectory()) {
      throw new InvalidArgument(
        `image_sub_path "${use.subPath}" is not a directory in image volume ${use.image}: name a directory of the image`,
      );
    }
    out.push({ destination: use.containerPath, source });
  }
  return out;
}

/** Removes the shared views no other container uses any more (the container's record is still in the table). */
export async function releaseImageVolumes(ctx: PodContext, record: ContainerRecord, log: Logger): Promise<void> {
  for (const key of new Set((record.imageVolumes ?? []).map((u) => u.key))) {
    await ctx.locks.run(key, async () => {
      // Removed containers whose cleanup has not run yet still hold the view too.
      const holders = [...ctx.tables.containers.list(), ...ctx.tables.containerCleanups.list()];
      const users = holders.filter((c) => c.id !== record.id && c.imageVolumes?.some((u) => u.key === key));
      if (users.length > 0) return;
      await ctx.images.removeRootfs(key);
      log.debug({ key }, 'image volume released');
    });
  }
}
