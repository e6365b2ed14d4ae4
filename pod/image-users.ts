// Who still uses an image, said so a person can act on it: RemoveImage refuses such an image and names the user.
import type { Tables } from './records.js';

/**
 * The first container (its root filesystem or an image volume) or sandbox (its pause) using the image, described
 * by name and id; undefined when none does. A removed container still being cleaned up holds its layers mounted.
 */
export function imageUsedBy(tables: Pick<Tables, 'containers' | 'containerCleanups' | 'sandboxes'>, imageId: string): string | undefined {
  const uses = (c: { image: { id: string }; imageVolumes?: { imageId: string }[] }) =>
    c.image.id === imageId || c.imageVolumes?.some((v) => v.imageId === imageId);
  const podOf = (sandboxId: string) => {
    const m = tables.sandboxes.get(sandboxId)?.config.metadata;
    return m ? ` of pod ${m.namespace}/${m.name}` : '';
  };
  const container = tables.containers.list().find(uses);
  if (container) {
    return `container "${container.config.metadata.name}" (${container.id})${podOf(container.sandboxId)}: remove the container first`;
  }
  const cleanup = tables.containerCleanups.list().find(uses);
  if (cleanup) {
    return `container "${cleanup.config.metadata.name}" (${cleanup.id}), removed but still being cleaned up: ` +
      'retry once its cleanup is done';
  }
  const sandbox = tables.sandboxes.list().find((s) => s.pauseImage.id === imageId);
  if (sandbox) {
    return `the pause of sandbox ${sandbox.config.metadata.namespace}/${sandbox.config.metadata.name} (${sandbox.id}): ` +
      'remove the sandbox first';
  }
  return undefined;
}
