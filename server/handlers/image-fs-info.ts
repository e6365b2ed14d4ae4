// ImageFsInfo: what the image filesystem holds, for kubelet's image garbage collection.
import { nanosFromMillis } from '../../core/time.js';
import type { Edge } from '../edge.js';
import type { ImageRpc } from '../service.js';

export function ImageFsInfo(edge: Edge): ImageRpc<'ImageFsInfo'> {
  return async () => {
    const fs = await edge.images.fsInfo();
    return {
      image_filesystems: [{
        timestamp: nanosFromMillis(fs.timestamp), fs_id: { mountpoint: fs.mountpoint },
        used_bytes: { value: String(fs.usedBytes) }, inodes_used: { value: String(fs.inodesUsed) },
      }],
      container_filesystems: [],
    };
  };
}
