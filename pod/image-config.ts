// An image's config in the shape the spec builders read (OCI field names).
import type { ImageRecord } from '../oci/image/types.js';
import type { ImageConfig as SpecImageConfig } from '../oci/runtime/spec/index.js';

export function specImageConfig(image: ImageRecord): SpecImageConfig {
  const c = image.config;
  return {
    Entrypoint: c.entrypoint, Cmd: c.cmd, Env: c.env, WorkingDir: c.workingDir, User: c.user,
    Volumes: Object.fromEntries(c.volumes.map((v) => [v, {}])), StopSignal: c.stopSignal,
  };
}
