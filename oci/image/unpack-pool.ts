// Layer unpacking on worker threads: the main thread reads the blob (from the registry or the store) and
// hands its bytes to a worker that unpacks them, so a pull's CPU work runs beside the event loop that serves
// CRI calls, and its garbage is collected on the worker's own heap. Workers are kept for the next layer.
import type { Readable } from 'node:stream';
import { Worker } from 'node:worker_threads';
import { Internal, InvalidArgument } from '../../core/errors.js';
import type { UnpackResult } from './unpack.js';

export type ToWorker =
  | { type: 'start'; dest: string; what: string }
  | { type: 'chunk'; data: Uint8Array }
  | { type: 'end' }
  | { type: 'abort'; message: string };

export type FromWorker =
  | { type: 'ack'; bytes: number }
  | { type: 'done'; diffId: string; bytes: number }
  | { type: 'error'; code?: string; message: string };

/** Bytes sent to a worker and not yet taken by its unpack: the source pauses past this. */
const IN_FLIGHT = 4 << 20;

/** An idle worker is ended after this long: between pulls the daemon stays as small as it was. */
const IDLE_MS = 5000;

const idle: Array<{ worker: Worker; timer: NodeJS.Timeout }> = [];

function spawn(): Worker {
  // A young generation of its own size: the daemon runs with a tiny one to stay small when idle, which would
  // make streaming 100 MB through a layer mostly garbage collection.
  return new Worker(new URL('./unpack-worker.js', import.meta.url), { resourceLimits: { maxYoungGenerationSizeMb: 48 } });
}

/**
 * Unpacks `source` (a layer blob's bytes) into `dest` on a worker; see unpackLayer. A failure of the source
 * itself (a stalled download, a digest mismatch) is what the promise rejects with.
 */
export async function unpackInWorker(source: Readable, dest: string, what: string): Promise<UnpackResult> {
  const kept = idle.pop();
  if (kept) clearTimeout(kept.timer);
  const worker = kept?.worker ?? spawn();
  worker.ref();
  let healthy = false;
  try {
    const result = await new Promise<UnpackResult>((resolve, reject) => {
      let inFlight = 0;
      let sourceError: unknown;
      const post = (m: ToWorker, transfer?: ArrayBuffer[]) => worker.postMessage(m, transfer);
      const failed = (err: Error) => reject(sourceError ?? err);
      worker.on('message', (m: FromWorker) => {
        if (m.type === 'ack') {
          inFlight -= m.bytes;
          if (inFlight < IN_FLIGHT && source.isPaused()) source.resume();
        } else if (m.type === 'done') {
          healthy = true;
          if (sourceError) reject(sourceError);
          else resolve({ diffId: m.diffId, bytes: m.bytes });
        } else {
          healthy = true;
          failed(m.code === 'invalid-argument' ? new InvalidArgument(m.message) : new Internal(`${what}: ${m.message}`));
        }
      });
      worker.once('error', (err) => failed(new Internal(`${what}: the unpack worker failed: ${err.message}`)));
      worker.once('exit', (code) => failed(new Internal(`${what}: the unpack worker exited with code ${code}`)));
      post({ type: 'start', dest, what });
      source.on('data', (chunk: Buffer) => {
        // A copy of just this chunk (a Buffer may be a slice of a larger pool), moved, not cloned again.
        const data = new Uint8Array(chunk);
        inFlight += data.byteLength;
        post({ type: 'chunk', data }, [data.buffer as ArrayBuffer]);
        if (inFlight >= IN_FLIGHT) source.pause();
      });
      let ended = false;
      source.once('end', () => { ended = true; post({ type: 'end' }); });
      // Destroyed without an error (its consumer gave up): the worker stops too.
      source.once('close', () => { if (!ended && sourceError === undefined) post({ type: 'abort', message: 'the layer\'s source closed early' }); });
      source.once('error', (err) => {
        sourceError ??= err;
        post({ type: 'abort', message: err.message });
      });
    });
    return result;
  } finally {
    worker.removeAllListeners('message');
    worker.removeAllListeners('error');
    worker.removeAllListeners('exit');
    if (healthy) {
      worker.unref();
      const entry = {
        worker,
        timer: setTimeout(() => {
          idle.splice(idle.indexOf(entry), 1);
          void worker.terminate();
        }, IDLE_MS).unref(),
      };
      idle.push(entry);
    } else {
      void worker.terminate();
    }
  }
}
