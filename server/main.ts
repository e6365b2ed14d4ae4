#!/usr/bin/env -S -u NODE_COMPILE_CACHE MALLOC_MMAP_THRESHOLD_=131072 node --max-semi-space-size=1 --heap-growing-percent=40 --single-threaded-gc
// The `minicri` command (server/cli.ts), started as fast as Node allows: a restarted daemon is only useful once it
// answers, and most of a start used to go to finding, reading and compiling several hundred modules. So the
// command runs bundled (dist/bundle/minicri.js, made by scripts/bundle.mjs), and V8's compiled code for it
// is kept on disk between starts (Node's module compile cache), in a directory only root can write to, since V8
// runs what it finds there (compile-cache.ts). NODE_COMPILE_CACHE is dropped from the environment first: Node
// would otherwise use the directory it names from its start, before anything could check it.
// The flags on the first line: a small young generation keeps the daemon's RSS down; the daemon's allocations
// are small and short-lived. V8 would otherwise let the old generation grow to about four times what is live
// before collecting it: with 1.4x the daemon stays near 100 MiB through pod storms instead of drifting towards
// 150 MiB.
// Once a burst of work is over, the daemon also compacts its heap (quiet-collector.ts).
// glibc's malloc raises its mmap threshold (up to 32 MiB) each time a block it had mmap'd is freed, after
// which blocks of that size (network and file buffers while pulling) come from arenas that keep their
// pages when freed. Fixing the threshold at glibc's default (128 KiB), which also fixes the trim threshold,
// hands them back instead: about 10 MiB less RSS from start to 110 pods, with no change measured in pod
// start or relist times. While the unpack workers are kept warm, the trim threshold is raised again
// (oci/image/unpack-pool.ts).
// The collector works on the thread that needs it rather than on helper threads beside it: on a node's few
// cores the helpers took as much CPU from a pull as one of its unpack workers (full marking of the daemon's
// heap, set off by the pull's buffers), and a 100 MB pull takes about a sixth less CPU without them; RPC times
// measured the same either way.
import { enableCompileCache } from 'node:module';
import { prepareCompileCacheDir } from './compile-cache.js';

if (process.getuid?.() === 0) {
  try {
    const distrusted = prepareCompileCacheDir('/var/cache', 'minicri', 'compile');
    if (distrusted) process.stderr.write(`minicri: running without the compile cache: ${distrusted}\n`);
    else enableCompileCache('/var/cache/minicri/compile');
  } catch {
    // A read-only /var/cache: start without the cache, only slower.
  }
}
await import(new URL('../bundle/minicri.js', import.meta.url).href);
