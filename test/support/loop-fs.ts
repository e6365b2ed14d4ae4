// A fresh ext4 filesystem in a sparse file, loop-mounted on a directory: a disk of its own for a test or a
// bench. mount's loop option attaches a free loop device and sets it to detach when the mount goes, so
// unmounting (unmountUnder) and deleting the file leave nothing behind.
import { rm } from 'node:fs/promises';
import { execa } from 'execa';

/**
 * Makes `image` a sparse file of `size` (truncate's syntax: "256M", "20G") holding ext4, mounted on `dir` with
 * `options` beside loop.
 */
export async function mountFreshExt4(dir: string, image: string, size: string, options: string[] = []): Promise<void> {
  try {
    await execa('truncate', ['-s', size, image]);
    await execa('mkfs.ext4', ['-q', '-F', image]);
    await execa('mount', ['-o', ['loop', ...options].join(','), image, dir]);
  } catch (err) {
    await rm(image, { force: true });
    throw err;
  }
}
