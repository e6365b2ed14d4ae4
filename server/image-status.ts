// ListImages, ImageStatus, RemoveImage and ImageFsInfo: the image store as kubelet's image manager sees it.
import type { Image } from '../gen/runtime/v1/Image.js';
import { imageUser } from '../oci/image/images.js';
import type { ImageRecord } from '../oci/image/types.js';
import type { Deps } from '../pod/context.js';
import { nanosFromMillis } from '../pod/records.js';
import type { ImageHandlers } from './image-service.js';

function criImage(r: ImageRecord): Image {
  const user = imageUser(r.config.user);
  return {
    id: r.id, repo_tags: r.repoTags, repo_digests: r.repoDigests, size: String(r.size),
    uid: user.uid === undefined ? null : { value: String(user.uid) }, username: user.username ?? '',
    spec: { image: r.id }, pinned: r.pinned,
  };
}

export function imageStatusHandlers(deps: Deps): ImageHandlers {
  return {
    ListImages: (request) => ({ images: deps.images.list({ image: request.filter?.image?.image || undefined }).map(criImage) }),
    ImageStatus: (request) => {
      // An absent image is an empty answer, not an error: kubelet asks before every pull.
      const record = deps.images.status(request.image?.image ?? '');
      const info: Record<string, string> = {};
      if (record && request.verbose) info.info = JSON.stringify({ id: record.id, layers: record.layers, config: record.config });
      return { image: record ? criImage(record) : null, info };
    },
    RemoveImage: async (request, ctx) => {
      await deps.images.remove(request.image?.image ?? '');
      ctx.log.info({ image: request.image?.image }, 'image removed');
      return {};
    },
    ImageFsInfo: async () => {
      const fs = await deps.images.fsInfo();
      return {
        image_filesystems: [{
          timestamp: nanosFromMillis(fs.timestamp), fs_id: { mountpoint: fs.mountpoint },
          used_bytes: { value: String(fs.usedBytes) }, inodes_used: { value: String(fs.inodesUsed) },
        }],
        container_filesystems: [],
      };
    },
  };
}
