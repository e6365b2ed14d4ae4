// Finding programs the way a shell does: conmon wants absolute paths, and Status reports missing ones.
import { accessSync, constants } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';

/**
 * The absolute path `command` names, directly or through PATH, if it is executable. Synchronous: a local
 * access() takes microseconds, a trip through libuv's thread pool tens of them, and Status asks every call.
 */
export function resolveExecutable(command: string): string | undefined {
  const candidates = isAbsolute(command) ? [command] : (process.env.PATH ?? '').split(delimiter).filter(Boolean).map((dir) => join(dir, command));
  return candidates.find((candidate) => {
    try {
      accessSync(candidate, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}
