// Image volumes (KEP 4639): an image, already pulled, mounted as a volume. The edge mounts the image's
// read-only view on the host; here it becomes a bind mount that is read-only, nosuid and nodev, of the image's
// root or of a directory inside it. Not noexec: since cri-api v0.36 binaries shipped in an image volume must run.
import path from 'node:path';
import { InvalidArgument } from '../../../core/errors.js';
import type { SpecOpt } from './opts.js';

export interface ImageVolumeMount {
  /** Where the container sees it. */
  destination: string;
  /** The directory on the host: the image's view, or the sub path inside it. */
  source: string;
}

/**
 * The image_sub_path of an image mount as a clean path relative to the image's root ('' for the root itself).
 * An absolute path or one whose '..' leaves the image is refused. Symlinks inside the image are the edge's to
 * resolve (within the image) when it mounts.
 */
export function imageSubPath(subPath: string, image: string): string {
  if (subPath === '') return '';
  if (subPath.includes('\0') || path.posix.isAbsolute(subPath)) {
    throw new InvalidArgument(`image_sub_path "${subPath}" of image volume ${image} must be a relative path inside the image`);
  }
  const clean = path.posix.normalize(subPath).replace(/\/+$/, '');
  if (clean === '..' || clean.startsWith('../')) {
    throw new InvalidArgument(`image_sub_path "${subPath}" of image volume ${image} leaves the image: use a directory inside it`);
  }
  return clean === '.' ? '' : clean;
}

export function withImageVolumes(volumes: readonly ImageVolumeMount[]): SpecOpt {
  return (spec) => {
    if (volumes.length === 0) return;
    const taken = new Set(volumes.map((v) => path.posix.resolve(v.destination)));
    // An image volume replaces whatever else was to be mounted at the same place.
    spec.mounts = (spec.mounts ?? []).filter((m) => !taken.has(path.posix.resolve(m.destination)));
    for (const v of volumes) {
      spec.mounts.push({
        destination: v.destination, type: 'bind', source: v.source, options: ['rbind', 'ro', 'nosuid', 'nodev', 'rprivate'],
      });
    }
  };
}
