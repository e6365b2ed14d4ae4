// Layer unpacking on a worker thread: the main thread reads the blob (from the registry or the store) and
// hands its bytes to a worker that unpacks them, so a pull's CPU work runs beside the event loop that serves
// CRI calls, and its garbage is collected on the worker's own heap. Two workers share the layers under way
// (each stays compiled and warm across layers) and end after five minutes idle, unless the daemon keeps them
// (keepUnpackWorkers). Big manifests and configs are parsed there too: a registry's 8 MiB of JSON takes
// seconds to parse and check.
import { getCompileCacheDir } from 'node:module';
import type { Readable } from 'node:stream';
import { Worker } from 'node:worker_threads';
import { Internal, InvalidArgument } from '../../core/errors.js';
import { keepFreedMemoryUpTo, returnFreedMemory } from '../../core/malloc-trim.js';
import { parseDocument, type DocumentJob, type ParsedDocument } from './manifest.js';
import type { BlobToWrite, UnpackResult } from './unpack.js';

export type ToWorker =
  | { type: 'start'; id: number; dest: string; what: string; blob?: BlobToWrite }
  | { type: 'chunk'; id: number; data: Uint8Array[] }
  | { type: 'end'; id: number }
  | { type: 'abort'; id: number; message: string }
  | { type: 'parse'; id: number; job: DocumentJob };

export type FromWorker =
  | { type: 'ack'; id: number; bytes: number }
  | { type: 'done'; id: number; diffId: string; bytes: number }
  | { type: 'parsed'; id: number; value: unknown }
  | { type: 'error'; id: number; code?: string; message: string; errno?: string; path?: string };


/**
 * Bytes the main thread gathers before it hands them to the worker in one message, and bytes sent for one layer
 * and not yet taken by its unpack (the source pauses past this). The socket's pieces are freed only once the
 * worker collects them, so every MiB queued here is daemon memory for each layer under way: 2 MiB in flight
 * in messages of 512 KiB took a 100 MB pull's peak RSS about 23 MiB lower than 4 MiB in MiB messages, for the
 * same CPU time; 1 MiB in 256 KiB messages was 16 MiB lower still but took a tenth more CPU.
 */
const BATCH = 512 << 10;
const IN_FLIGHT = 2 << 20;
/**
 * A worker that unpacked is ended after this long without a job, and what it held goes back to the system.
 * A node pulls in bursts (a rollout, a new node's first pods, kubelet pulling a pod's images one after another),
 * and a worker started afresh runs its first layers unoptimized: a cold pull of a 100 MB image took about 0.33 s
 * on new workers and 0.22 s on warm ones (half again the CPU). Two idle workers hold 40–55 MiB after a 100 MB pull.
 */
const IDLE_MS = 5 * 60_000;
/** Whether workers that unpacked stay for good instead (keepUnpackWorkers). */
let keepWorkers = false;
/** One that parsed a big document goes sooner, kept or not: its heap may still hold a registry's megabytes of JSON. */
const PARSED_IDLE_MS = 5000;
/**
 * Once every worker has been without a job this long, what the pieces of the pull took from malloc is given back
 * to the system (core/malloc-trim.ts); again when a worker ends, for what its end freed. While the workers are
 * kept (keepUnpackWorkers), only past KEPT_PULL_MEMORY: memory given back is memory the next pull faults in again,
 * page by page, and on these VMs a fault costs 11–16 µs. A 100 MB pull took 10–11 thousand faults and 0.41–0.47 s
 * after the trim, 0.3–3 thousand and 0.28–0.32 s on the memory the pull before it left.
 */
const TRIM_AFTER_MS = 2000;
/**
 * How far the daemon's RSS may stay above its size when the workers were kept before the pulls' memory goes back
 * anyway: a 100 MB pull leaves 25-45 MiB, but each bigger or busier pull left more (a bench's 100 MB, small-files
 * and 1 GB pulls, three times over, took an idle daemon from 159 to 222 MiB).
 */
const KEPT_PULL_MEMORY = 48 << 20;
let keptFrom = 0;
let trimTimer: NodeJS.Timeout | undefined;

/** Whether an idle pool gives its pulls' memory back: always, unless kept and within KEPT_PULL_MEMORY of `keptFrom`. Pure. */
export function trimWhenIdle(kept: boolean, rss: number, from: number): boolean {
  return !kept || rss > from + KEPT_PULL_MEMORY;
}

interface Job { onMessage(m: FromWorker): void; onFailure(err: Error): void }

interface UnpackWorker {
  worker: Worker; jobs: Map<number, Job>; idle?: NodeJS.Timeout; unpacks?: boolean;
  /** It parsed a big document: its heap may hold megabytes of garbage, so it ends soon once idle, kept or not. */
  parsed?: boolean;
}

/** Two workers: with the hashing, the tar entries and the writes of several layers, one thread is the bottleneck. */
const WORKERS = 2;
const running: UnpackWorker[] = [];
let nextId = 0;

/** The least busy worker, started when fewer than WORKERS run and all of them are busy. */
function worker(): UnpackWorker {
  const least = running.reduce<UnpackWorker | undefined>((a, w) => (!a || w.jobs.size < a.jobs.size ? w : a), undefined);
  if (least && (least.jobs.size === 0 || running.length >= WORKERS)) {
    clearTimeout(least.idle);
    return least;
  }
  return start();
}

function start(): UnpackWorker {
  // A young generation of its own size: the daemon runs with a tiny one to stay small when idle, which would
  // make streaming 100 MB through a layer mostly garbage collection. 16 MiB unpacked as fast as 48 MiB did (the
  // bytes are off the heap) and leaves an idle worker 9 MiB smaller.
  // V8's compile cache, when the daemon keeps one (server/main.ts), serves the worker's modules too, in a directory
  // of its own below the daemon's: Node reads it from a thread's environment as the thread starts.
  const cache = getCompileCacheDir();
  const w = new Worker(new URL('./unpack-worker.js', import.meta.url), {
    resourceLimits: { maxYoungGenerationSizeMb: 16 },
    ...(cache !== undefined && { env: { ...process.env, NODE_COMPILE_CACHE: cache } }),
  });
  const state: UnpackWorker = { worker: w, jobs: new Map() };
  const fail = (err: Error) => {
    forget(state);
    for (const job of state.jobs.values()) job.onFailure(err);
    state.jobs.clear();
  };
  w.on('message', (m: FromWorker) => state.jobs.get(m.id)?.onMessage(m));
  w.on('error', (err: unknown) => fail(new Internal(`the unpack worker failed: ${err instanceof Error ? err.message : String(err)}`)));
  w.on('exit', (code) => fail(new Internal(`the unpack worker exited with code ${code}`)));
  w.unref();
  running.push(state);
  return state;
}

function forget(w: UnpackWorker): void {
  const i = running.indexOf(w);
  if (i >= 0) running.splice(i, 1);
}

/** Layers smaller than this unpack on the main thread: a message round trip would cost more than the work. */
const WORKER_MIN_BYTES = 128 << 10;

export function unpacksInWorker(layerBytes: number): boolean {
  return layerBytes >= WORKER_MIN_BYTES;
}

/** Starts workers (one per layer, up to WORKERS) ahead of the first layer, so their start overlaps the layer requests. */
export function warmUnpackWorkers(layers: number): void {
  for (const w of running) if (w.jobs.size === 0) idleLater(Object.assign(w, { unpacks: true }));
  for (let i = running.length; i < Math.min(layers, WORKERS); i++) idleLater(Object.assign(start(), { unpacks: true }));
}

/**
 * Workers that unpacked stay from now on, warm for every later pull however far apart (the daemon's warm-up,
 * warm-up.ts, runs them), and so does the memory pulls work in, up to KEPT_PULL_MEMORY above the daemon's size
 * now: two idle workers hold about 40 MiB, the memory 25-45 MiB more. One that parsed a big document still ends.
 */
export function keepUnpackWorkers(): void {
  keepWorkers = true;
  keptFrom = process.memoryUsage.rss();
  // Nor does free() hand it back piece by piece, up to a share of the bound at the top of each arena a pull works
  // in (the workers' and the event loop's): malloc_trim, once idle, cannot shrink a thread's arena from the top.
  keepFreedMemoryUpTo(KEPT_PULL_MEMORY / (WORKERS + 1));
  // The trim set off when the warm-up's last layer was done, before this call.
  clearTimeout(trimTimer);
  for (const w of running) if (unpacksOnly(w)) clearTimeout(w.idle);
}

/** A worker that unpacked and never parsed a big document: the one worth keeping warm. */
function unpacksOnly(w: UnpackWorker): boolean {
  return w.unpacks === true && w.parsed !== true;
}

function idleLater(w: UnpackWorker): void {
  clearTimeout(w.idle);
  if (keepWorkers && unpacksOnly(w)) return;
  w.idle = setTimeout(() => {
    if (w.jobs.size === 0) {
      forget(w);
      void w.worker.terminate().then(returnFreedMemory);
    }
  }, unpacksOnly(w) ? IDLE_MS : PARSED_IDLE_MS).unref();
}

/**
 * Unpacks `source` (a layer blob's bytes) into `dest` on the worker; see unpackLayer. With `blob`, the worker
 * also checks size and digest (see blobWriter), and writes the bytes to blob.tmp when given. A failure of the source
 * itself (a stalled download) is what the promise rejects with. The source's chunks are moved to the worker:
 * nothing else may keep them past its own 'data' listeners, which must be added before this is called.
 */
export function unpackInWorker(source: Readable, dest: string, what: string, blob?: BlobToWrite): Promise<UnpackResult> {
  const w = worker();
  w.unpacks = true;
  const id = nextId++;
  w.worker.ref();
  return new Promise<UnpackResult>((resolve, reject) => {
    let inFlight = 0;
    let sourceError: unknown;
    let ended = false;
    const post = (m: ToWorker, transfer?: ArrayBuffer[]) => w.worker.postMessage(m, transfer);
    const finish = () => release(w, id);
    w.jobs.set(id, {
      onMessage(m) {
        if (m.type === 'ack') {
          inFlight -= m.bytes;
          if (inFlight < IN_FLIGHT && source.isPaused()) source.resume();
          return;
        }
        finish();
        // Answered before its source ended (a bad blob, a layer dir not made): the rest is not read.
        if (!ended) source.destroy();
        if (sourceError) reject(sourceError);
        else if (m.type === 'parsed') reject(new Internal(`${what}: the worker answered a parse`));
        else if (m.type === 'done') resolve({ diffId: m.diffId, bytes: m.bytes });
        else {
          reject(m.code === 'invalid-argument'
            ? new InvalidArgument(m.message)
            : new Internal(m.message, m.errno ? { cause: systemErrorOf(m) } : undefined));
        }
      },
      onFailure(err) {
        source.destroy();
        reject(sourceError ?? new Internal(`${what}: ${err.message}`));
      },
    });
    post({ type: 'start', id, dest, what, blob });
    // The socket's pieces (tens of KiB, each its own memory) are gathered up to BATCH and moved to the worker in
    // one message, not copied: per piece, a message and a gunzip call cost more than the inflating itself, and
    // a copy into batches doubled what the event loop allocates (and collects) per byte downloaded.
    let pieces: Uint8Array[] = [];
    let filled = 0;
    const flush = () => {
      if (filled === 0) return;
      inFlight += filled;
      post({ type: 'chunk', id, data: pieces }, pieces.map((p) => p.buffer as ArrayBuffer));
      pieces = [];
      filled = 0;
      if (inFlight >= IN_FLIGHT) source.pause();
    };
    source.on('data', (chunk: Buffer) => {
      pieces.push(ownMemory(chunk));
      filled += chunk.byteLength;
      if (filled >= BATCH) flush();
    });
    source.once('end', () => { flush(); ended = true; post({ type: 'end', id }); });
    source.once('error', (err) => {
      sourceError ??= err;
      post({ type: 'abort', id, message: err.message });
    });
    // Destroyed without an error (its consumer gave up): the worker stops too.
    source.once('close', () => {
      if (!ended && sourceError === undefined) post({ type: 'abort', id, message: 'the layer\'s source closed early' });
    });
  });
}

/**
 * `chunk` itself when it is the whole of its memory (a socket's read), else a copy that is (a view into a pool
 * or a larger read): moving memory to the worker takes it from every view of it, which must be no one else's.
 */
function ownMemory(chunk: Buffer): Uint8Array {
  return chunk.byteOffset === 0 && chunk.byteLength === chunk.buffer.byteLength ? chunk : new Uint8Array(chunk);
}

/** JSON up to this size is parsed on the main thread: in well under a millisecond, less than a message costs. */
const PARSE_INLINE_BYTES = 64 << 10;

/** What manifest.ts's parse of `job` answers: on a worker when the JSON is big, so the event loop never waits on it. */
export function parseOffThread<J extends DocumentJob>(job: J): Promise<ParsedDocument<J>> {
  if (job.bytes.byteLength <= PARSE_INLINE_BYTES) return Promise.resolve().then(() => parseDocument(job));
  const w = worker();
  const id = nextId++;
  w.worker.ref();
  return new Promise<ParsedDocument<J>>((resolve, reject) => {
    w.jobs.set(id, {
      onMessage(m) {
        // Its heap may now hold megabytes of JSON, which an idle worker never collects: it ends soon, warm or not.
        w.parsed = true;
        release(w, id);
        if (m.type === 'parsed') resolve(m.value as ParsedDocument<J>);
        else if (m.type === 'error') reject(m.code === 'invalid-argument' ? new InvalidArgument(m.message) : new Internal(m.message));
        else reject(new Internal(`${job.what}: the worker answered a parse with "${m.type}"`));
      },
      onFailure(err) { reject(new Internal(`${job.what}: ${err.message}`)); },
    });
    w.worker.postMessage({ type: 'parse', id, job } satisfies ToWorker);
  });
}

/** A job of `w` is over: an idle worker no longer keeps the daemon up and ends after a while. */
function release(w: UnpackWorker, id: number): void {
  w.jobs.delete(id);
  if (w.jobs.size === 0) {
    w.worker.unref();
    idleLater(w);
  }
  clearTimeout(trimTimer);
  if (running.every((r) => r.jobs.size === 0) && trimWhenIdle(keepWorkers, process.memoryUsage.rss(), keptFrom)) {
    trimTimer = setTimeout(() => { if (running.every((r) => r.jobs.size === 0)) returnFreedMemory(); }, TRIM_AFTER_MS).unref();
  }
}

/** The worker's system call error as one of this thread's, with its code and path (a full disk stays ENOSPC). */
function systemErrorOf(m: { message: string; errno?: string; path?: string }): NodeJS.ErrnoException {
  return Object.assign(new Error(m.message), { code: m.errno, ...(m.path ? { path: m.path } : {}) });
}
