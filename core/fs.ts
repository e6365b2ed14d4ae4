// Small file-system questions asked all over the tree.
import { randomBytes } from 'node:crypto';
import { rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';

/** Whether `path` names something (a link is followed); any failure to stat it counts as no. */
export function exists(path: string): Promise<boolean> {
  return stat(path).then(() => true, () => false);
}

/** Writes `data` to `file` atomically: a temp file beside it (`.tmp-*`), then a rename over the target. */
export async function writeFileAtomic(file: string, data: string | Buffer, mode = 0o600): Promise<void> {
  const tmp = path.join(path.dirname(file), `.tmp-${randomBytes(6).toString('hex')}`);
  try {
    await writeFile(tmp, data, { mode });
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}
