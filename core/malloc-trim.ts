// glibc gives memory back to the system only from the top of each of its arenas, and keeps the rest of what
// the daemon frees. A pull leaves the arenas fragmented: the socket's pieces are freed on the unpack workers,
// long after they were read, and the workers' output pieces come from arenas of their own. A 100 MB pull left
// the daemon 55 MiB larger for good (95 to 150 MiB RSS, read after its workers had ended); malloc_trim(0) hands
// back every free page but those at the top of a thread's arena, which only free() trims (with it, 193–195 MiB
// after the pull, 148–163 MiB two seconds on with the workers still up, 106 MiB once they had ended, from 90 at
// the start). It holds the thread that calls it about 0.07 ms per MiB it gives back (9 ms for 128 MiB freed in
// 64 KiB blocks), so it is called once a pull is over, not during one. Node has no call for it, hence the addon
// (malloc-trim/malloc-trim.c, built to dist/native/ by scripts/build-native.sh).
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

interface Addon { mallocTrim(): boolean; setTrimThreshold(bytes: number): void }

let addon: Addon | undefined;
let unavailable: string | undefined;
/** What keepFreedMemoryUpTo last set; undefined until it is called. */
let keptUpTo: number | undefined;

/** Loads the addon; undefined once it is loaded, else why it cannot be (the daemon then keeps what it freed). */
export function loadMallocTrim(): string | undefined {
  if (addon || unavailable !== undefined) return unavailable;
  const path = fileURLToPath(new URL('../native/malloc-trim.node', import.meta.url));
  try {
    addon = createRequire(import.meta.url)(path) as Addon;
  } catch (err) {
    unavailable = `${path}: ${(err as Error).message}`;
  }
  return unavailable;
}

/** Hands the free pages of malloc's arenas back to the system; whether there were any (false without the addon). */
export function returnFreedMemory(): boolean {
  return loadMallocTrim() === undefined && addon!.mallocTrim();
}

/**
 * Lets the top of each malloc arena hold up to `bytes` free before free() hands it back: glibc trims it past
 * 128 KiB here (the daemon fixes the mmap threshold, which fixes this one too), and memory given back is memory
 * the next pull faults in again. malloc_trim gives back the main arena's top but not a thread's: what a worker's
 * arena keeps there stays until it frees past `bytes`. Whether the setting took (false without the addon).
 */
export function keepFreedMemoryUpTo(bytes: number): boolean {
  if (loadMallocTrim() !== undefined) return false;
  addon!.setTrimThreshold(bytes);
  keptUpTo = bytes;
  return true;
}

/** The bytes each arena's top may hold free as keepFreedMemoryUpTo last set them; undefined until it is called. */
export function freedMemoryKeptUpTo(): number | undefined {
  return keptUpTo;
}
