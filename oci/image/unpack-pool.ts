// Layer unpacking on a worker thread: the main thread reads the blob (from the registry or the store) and
// hands its bytes to a worker that unpacks them, so a pull's CPU work runs beside the event loop that serves
// CRI calls, and its garbage is collected on the worker's own heap. Two workers share the layers under way
// (each stays compiled and warm across layers) and end after a few idle seconds.
import type { Readable } from 'node:stream';
import { Worker } from 'node:worker_threads';
import { Internal, InvalidArgument } from '../../core/errors.js';
import type { BlobToWrite, UnpackResult } from './unpack.js';

export type ToWorker =
  | { type: 'start'; id: number; dest: string; what: string; blob?: BlobToWrite }
  | { type: 'chunk'; id: number; data: Uint8Array }
  | { type: 'end'; id: number }
  | { type: 'abort'; id: number; message: string };

export type FromWorker =
  | { type: 'ack'; id: number; bytes: number }
  | { type: 'done'; id: number; diffId: string; bytes: number }
  | { type: 'error'; id: number; code?: string; message: string; errno?: string; path?: string };


/** Bytes the main thread gathers before it hands them to the worker in one message. */
const BATCH = 1 << 20;
/** Bytes sent for one layer and not yet taken by its unpack: the source pauses past this. */
const IN_FLIGHT = 4 << 20;
/** The worker is ended after this long without a layer: between pulls the daemon stays as small as it was. */
const IDLE_MS = 5000;

interface Job { onMessage(m: FromWorker): void; onFailure(err: Error): void }

interface UnpackWorker { worker: Worker; jobs: Map<number, Job>; idle?: NodeJS.Timeout }

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
  // make streaming 100 MB through a layer mostly garbage collection.
  const w = new Worker(new URL('./unpack-worker.js', import.meta.url), { resourceLimits: { maxYoungGenerationSizeMb: 48 } });
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
  for (const w of running) if (w.jobs.size === 0) idleLater(w);
  for (let i = running.length; i < Math.min(layers, WORKERS); i++) idleLater(start());
}

function idleLater(w: UnpackWorker): void {
  clearTimeout(w.idle);
  w.idle = setTimeout(() => {
    if (w.jobs.size === 0) {
      forget(w);
      void w.worker.terminate();
    }
  }, IDLE_MS).unref();
}

/**
 * Unpacks `source` (a layer blob's bytes) into `dest` on the worker; see unpackLayer. With `blob`, the worker
 * also writes the bytes to its temp file and checks size and digest (see blobWriter). A failure of the source
 * itself (a stalled download) is what the promise rejects with.
 */
export function unpackInWorker(source: Readable, dest: string, what: string, blob?: BlobToWrite): Promise<UnpackResult> {
  const w = worker();
  const id = nextId++;
  w.worker.ref();
  return new Promise<UnpackResult>((resolve, reject) => {
    let inFlight = 0;
    let sourceError: unknown;
    let ended = false;
    const post = (m: ToWorker, transfer?: ArrayBuffer[]) => w.worker.postMessage(m, transfer);
    const finish = () => {
      w.jobs.delete(id);
      if (w.jobs.size === 0) {
        w.worker.unref();
        idleLater(w);
      }
    };
    w.jobs.set(id, {
      onMessage(m) {
        if (m.type === 'ack') {
          inFlight -= m.bytes;
          if (inFlight < IN_FLIGHT && source.isPaused()) source.resume();
          return;
        }
        finish();
        if (sourceError) reject(sourceError);
        else if (m.type === 'done') resolve({ diffId: m.diffId, bytes: m.bytes });
        else reject(m.code === 'invalid-argument' ? new InvalidArgument(m.message) : new Internal(m.message, m.errno ? { cause: systemErrorOf(m) } : undefined));
      },
      onFailure(err) {
        source.destroy();
        reject(sourceError ?? new Internal(`${what}: ${err.message}`));
      },
    });
    post({ type: 'start', id, dest, what, blob });
    // The socket's pieces (tens of KiB) are copied into batches of a MiB, each moved to the worker, not cloned
    // again: per piece, a message and a gunzip call cost more than the inflating itself.
    let batch = new Uint8Array(BATCH);
    let filled = 0;
    const flush = () => {
      if (filled === 0) return;
      const data = batch.subarray(0, filled);
      inFlight += filled;
      post({ type: 'chunk', id, data }, [batch.buffer as ArrayBuffer]);
      batch = new Uint8Array(BATCH);
      filled = 0;
      if (inFlight >= IN_FLIGHT) source.pause();
    };
    source.on('data', (chunk: Buffer) => {
      for (let at = 0; at < chunk.byteLength;) {
        const n = Math.min(chunk.byteLength - at, BATCH - filled);
        batch.set(chunk.subarray(at, at + n), filled);
        filled += n;
        at += n;
        if (filled === BATCH) flush();
      }
    });
    source.once('end', () => { flush(); ended = true; post({ type: 'end', id }); });
    source.once('error', (err) => {
      sourceError ??= err;
      post({ type: 'abort', id, message: err.message });
    });
    // Destroyed without an error (its consumer gave up): the worker stops too.
    source.once('close', () => { if (!ended && sourceError === undefined) post({ type: 'abort', id, message: 'the layer\'s source closed early' }); });
  });
}

/** The worker's system call error as one of this thread's, with its code and path (a full disk stays ENOSPC). */
function systemErrorOf(m: { message: string; errno?: string; path?: string }): NodeJS.ErrnoException {
  return Object.assign(new Error(m.message), { code: m.errno, ...(m.path ? { path: m.path } : {}) });
}
