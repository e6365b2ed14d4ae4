// ImageFsInfo: what the image filesystem holds, for kubelet's image garbage collection, and, when the
// containers' writable layers are on a filesystem of their own, what they hold there (KEP-4191). An empty
// container_filesystems is kubelet's "not split": the writable layers share the image filesystem.
import { nanosFromMillis } from '../../core/time.js';
import type { FilesystemUsage } from '../../gen/runtime/v1/FilesystemUsage.js';
import { filesystemsSplit, storageDirs } from '../../oci/image/storage-dirs.js';
import type { Edge } from '../edge.js';
import type { ImageRpc } from '../service.js';

function usage(mountpoint: string, timestamp: number, bytes: number, inodes: number): FilesystemUsage {
  return {
    timestamp: nanosFromMillis(timestamp), fs_id: { mountpoint },
    used_bytes: { value: String(bytes) }, inodes_used: { value: String(inodes) },
  };
}

export function ImageFsInfo(edge: Edge): ImageRpc<'ImageFsInfo'> {
  return async () => {
    const dirs = storageDirs(edge.config);
    const [fs, split] = await Promise.all([edge.images.fsInfo(), filesystemsSplit(dirs)]);
    const layers = split ? await edge.images.writableLayersUsage() : undefined;
    return {
      image_filesystems: [usage(fs.mountpoint, fs.timestamp, fs.usedBytes, fs.inodesUsed)],
      container_filesystems: layers ? [usage(dirs.writableLayers, Date.now(), layers.bytes, layers.inodes)] : [],
    };
  };
}
