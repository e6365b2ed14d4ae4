// Keeps an unpack worker's malloc arena out of the daemon's forks. Every process the daemon starts (runc,
// conmon, a CNI plugin) begins as a fork, and a fork marks every writable page of the daemon copy-on-write:
// the next write to each page takes a fault, on these VMs 15–20 µs (50 MiB written again after one spawn:
// 12 800 faults and 243 ms, against 2.5 ms before it). A pull after a hundred pods faulted so on 9 thousand of
// its 12–13 thousand pages, the workers' arenas, where each piece a layer inflates to is written.
// madvise(MADV_DONTFORK) leaves a range out of the child, which only execs: it touches no worker's arena but
// the arena's header, where glibc's fork handler resets the arena's lock, and the header stays in. Only a range
// the process's mappings show to be one of glibc's thread heaps is marked.
import { readFileSync } from 'node:fs';
import { memoryAddon } from './malloc-trim.js';

/** glibc's HEAP_MAX_SIZE on 64-bit: each heap of a thread's arena is a mapping this large, aligned to it. */
export const ARENA_HEAP_BYTES = 64 << 20;
/** The heap's start: glibc's heap_info and the arena's malloc_state (a few KiB), which the child's fork handler writes. */
const HEADER_BYTES = 64 << 10;

/**
 * Whether `maps` (/proc/self/maps) shows [base, base + ARENA_HEAP_BYTES) as one heap of glibc's: anonymous
 * mappings that start at `base` and follow each other to its end, the first one readable and writable.
 */
export function isArenaHeap(maps: string, base: number): boolean {
  const end = base + ARENA_HEAP_BYTES;
  let at = base;
  for (const line of maps.split('\n')) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) (\S{4}) [0-9a-f]+ \S+ (\d+)\s*(.*)$/.exec(line);
    if (!m) continue;
    const start = parseInt(m[1]!, 16);
    const stop = parseInt(m[2]!, 16);
    if (stop <= base || start >= end) continue;
    const anonymous = m[4] === '0' && m[5] === '';
    if (start !== at || stop > end || !anonymous || (at === base && !m[3]!.startsWith('rw'))) return false;
    at = stop;
  }
  return at === end;
}

/** Marks the calling thread's malloc arena (an unpack worker's) to stay out of forks: true, or why it did not. */
export function keepThreadArenaFromForks(): true | string {
  const addon = memoryAddon();
  if (!addon) return 'the malloc-trim addon is not loaded';
  const base = addon.threadArenaHeap();
  if (base === 0) return 'this thread allocates from the main arena';
  if (!isArenaHeap(readFileSync('/proc/self/maps', 'utf8'), base)) return `no heap of glibc's at 0x${base.toString(16)}`;
  return addon.keepFromForks(base + HEADER_BYTES, ARENA_HEAP_BYTES - HEADER_BYTES) || 'madvise(MADV_DONTFORK) failed';
}
