// The daemon's addon for what Node can only do by forking it (posix/posix.c, built to dist/native/ by
// scripts/build-native.sh): start a program (core/spawn.ts) and make a device node or fifo (image unpack).
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/** Per child fd: a socket pair (its other end is returned), /dev/null, or the daemon's own fd of that number. */
export const STDIO_PAIR = -1;
export const STDIO_NULL = -2;
export const STDIO_INHERIT = -3;

interface Addon {
  /** [read end, write end] of a pipe for spawn's exit reports. */
  exitPipe(): [number, number];
  /**
   * [pid, pidfd, ...the daemon's ends of the socket pairs, in stdio order]. When the child has ended, a thread
   * writes { int32 tag, int32 wait status } to exitFd, in native byte order; the status is -1 when something
   * else reaped it.
   */
  spawn(
    file: string, argv: string[], envp: string[], cwd: string | undefined, stdio: number[], detached: boolean,
    exitFd: number, tag: number,
  ): [number, number, ...number[]];
  /** Signals the process a pidfd names; false when it has ended. */
  signal(pidfd: number, signo: number): boolean;
  mknod(path: string, type: 'c' | 'b' | 'p', mode: number, major: number, minor: number): void;
}

let addon: Addon | undefined;

/** The addon; throws, saying how to get it, when it was not built. */
export function posix(): Addon {
  if (addon) return addon;
  const path = fileURLToPath(new URL('../native/posix.node', import.meta.url));
  try {
    addon = createRequire(import.meta.url)(path) as Addon;
  } catch (err) {
    throw new Error(`cannot load ${path} (npm run build makes it): ${(err as Error).message}`, { cause: err });
  }
  return addon;
}

/** Makes a character or block device node or a fifo at `path` with exactly `mode` (umask aside). */
export function makeNode(path: string, type: 'c' | 'b' | 'p', mode: number, major = 0, minor = 0): void {
  posix().mknod(path, type, mode, major, minor);
}
