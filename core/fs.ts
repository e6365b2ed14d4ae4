// Small file-system questions asked all over the tree.
import { stat } from 'node:fs/promises';

/** Whether `path` names something (a link is followed); any failure to stat it counts as no. */
export function exists(path: string): Promise<boolean> {
  return stat(path).then(() => true, () => false);
}
