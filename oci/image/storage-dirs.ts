// Where the image store and the containers' writable layers live: images under root_dir, writable layers
// beside them or, with writable_layers_dir, on a filesystem of their own (KEP-4191's split image and
// container filesystems). Every reader of the layout (daemon, doctor, stats, ImageFsInfo) asks here.
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { FailedPrecondition } from '../../core/errors.js';

export interface StorageDirs {
  /** The image store: blobs, unpacked layers. */
  images: string;
  /** The writable layers' filesystem as ImageFsInfo and ContainerStats name it. */
  writableLayers: string;
  /** The containers' root filesystems (upper, work and mount dirs), below writableLayers. */
  rootfs: string;
}

/** Pure. */
export function storageDirs(settings: { root_dir: string; writable_layers_dir?: string | undefined }): StorageDirs {
  const images = join(settings.root_dir, 'images');
  const writableLayers = settings.writable_layers_dir ?? images;
  return { images, writableLayers, rootfs: join(writableLayers, 'rootfs') };
}

/** Whether the writable layers are on another filesystem than the images (same device: not split). */
export async function filesystemsSplit(dirs: StorageDirs): Promise<boolean> {
  if (dirs.writableLayers === dirs.images) return false;
  const [images, layers] = await Promise.all([stat(dirs.images), stat(dirs.writableLayers)]);
  return images.dev !== layers.dev;
}

/**
 * Refuses to open the store when writable_layers_dir moved while root filesystems are left in the old place
 * (`previous`; unknown: the default one): nothing would look for them there, and garbage collection would
 * take their images' layers from under them.
 */
export async function assertRootfsDirKept(previous: string | undefined, dirs: StorageDirs, rootDir: string): Promise<void> {
  const old = previous ?? storageDirs({ root_dir: rootDir }).rootfs;
  if (old === dirs.rootfs) return;
  const left = await readdir(old).catch(() => [] as string[]);
  if (left.length > 0) {
    throw new FailedPrecondition(`writable_layers_dir changed, but ${left.length} container root filesystems are still in ${old}: `
      + `remove those pods under the old setting first, or move ${old} to ${dirs.rootfs} while minicri is stopped`);
  }
}
