// The pause image: the configured `pause_image` (pulled on first use), or minicri's own pause binary
// imported as a one-file image so it is listed, pinned, like any other.
import { fileURLToPath } from 'node:url';
import type { Logger } from '../core/log.js';
import type { Images } from '../oci/image/images.js';
import { defaultMountRoots } from '../oci/runtime/spec/index.js';
import type { PauseImage } from './context.js';
import { specImageConfig } from './image-config.js';

export const PAUSE_BINARY = fileURLToPath(new URL('../pause/pause', import.meta.url));

export function builtinPauseName(version: string): string {
  return `localhost/minicri/pause:${version}`;
}

/** Returns the function sandboxes ask for their pause image; imports the built-in one now. */
export async function pauseImageSource(
  config: { pause_image: string },
  images: Pick<Images, 'status' | 'importLocal' | 'pull'>,
  version: string,
): Promise<(log: Logger) => Promise<PauseImage>> {
  if (!config.pause_image) {
    const name = builtinPauseName(version);
    const record = images.status(name) ?? await images.importLocal(
      name,
      // With the runtime's mount points in place, every pause can share this layer as its read-only root.
      [{ path: '/pause', source: PAUSE_BINARY, mode: 0o755 }, ...defaultMountRoots().map((path) => ({ path, directory: true }))],
      {
        entrypoint: ['/pause'], cmd: [], env: [], workingDir: '/', user: '65535:65535',
        exposedPorts: [], volumes: [], stopSignal: 'SIGINT', labels: {},
      },
      { pinned: true },
    );
    const pause = { id: record.id, name, config: specImageConfig(record) };
    return async () => pause;
  }
  let pulling: Promise<PauseImage> | undefined;
  return async (log) => {
    const present = images.status(config.pause_image);
    if (present) return { id: present.id, name: config.pause_image, config: specImageConfig(present) };
    // One pull at a time; once it settles the next sandbox looks again (the image may since be removed).
    pulling ??= images.pull(config.pause_image, undefined, { pinned: true })
      .then((record) => {
        log.info({ image: config.pause_image }, 'pause image pulled');
        return { id: record.id, name: config.pause_image, config: specImageConfig(record) };
      })
      .finally(() => { pulling = undefined; });
    return pulling;
  };
}
