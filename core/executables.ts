// Finding programs the way a shell does: conmon wants absolute paths, and Status reports missing ones.
import { access, constants } from 'node:fs/promises';
import { delimiter, isAbsolute, join } from 'node:path';

/** The absolute path `command` names, directly or through PATH, if it is executable. */
export async function resolveExecutable(command: string): Promise<string | undefined> {
  const candidates = isAbsolute(command) ? [command] : (process.env.PATH ?? '').split(delimiter).filter(Boolean).map((dir) => join(dir, command));
  for (const candidate of candidates) {
    if (await access(candidate, constants.X_OK).then(() => true, () => false)) return candidate;
  }
  return undefined;
}
