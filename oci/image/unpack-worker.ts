// The worker side of unpack-pool.ts: unpacks layers from the chunks the main thread sends, several at once,
// so gunzip's bookkeeping, the diff-id hash, the tar parsing, the file writes and their garbage stay off the
// thread that serves CRI calls; for a download, the blob's own hash (and file, where blobs are kept) too.
import { PassThrough } from 'node:stream';
import { parentPort } from 'node:worker_threads';
import { causeWhere, MinicriError } from '../../core/errors.js';
import { unpackLayerBlob } from './unpack.js';
import type { FromWorker, ToWorker } from './unpack-pool.js';

const port = parentPort!;
const sources = new Map<number, PassThrough>();

function send(m: FromWorker): void {
  port.postMessage(m);
}

/** The system call error behind `err` (itself or a cause), so the main thread can tell a full disk from a bug. */
function systemError(err: unknown): { errno?: string; path?: string } {
  const e = causeWhere(err, (c) => typeof c.code === 'string' && /^E[A-Z0-9]+$/.test(c.code));
  return e ? { errno: e.code, ...(e.path ? { path: e.path } : {}) } : {};
}

port.on('message', (m: ToWorker) => {
  const source = sources.get(m.id);
  switch (m.type) {
    case 'parse':
      // The JSON checks (zod) load with the first parse: a worker that only unpacks starts sooner, and its
      // smaller heap is quicker to collect, which it does every few MiB of a big layer.
      import('./manifest.js')
        .then(({ parseDocument }) => send({ type: 'parsed', id: m.id, value: parseDocument(m.job) }))
        .catch((err: unknown) => send({
          type: 'error', id: m.id, code: err instanceof MinicriError ? err.code : undefined, message: (err as Error).message,
        }));
      return;
    case 'start': {
      const s = new PassThrough({ highWaterMark: 1 << 20 });
      sources.set(m.id, s);
      // The blob's own digest check (and file), here too, when the bytes come from the registry.
      unpackLayerBlob(s, m.dest, m.what, undefined, m.blob).then(
        (r) => send({ type: 'done', id: m.id, diffId: r.diffId, bytes: r.bytes }),
        (err: Error) => send({
          type: 'error', id: m.id, code: err instanceof MinicriError ? err.code : undefined, message: err.message, ...systemError(err),
        }),
      ).finally(() => sources.delete(m.id));
      return;
    }
    case 'chunk': {
      // Each piece is written as it came from the socket: joining them took fresh memory for every batch, and
      // its page faults cost more CPU than the hashing (the daemon's malloc maps anything over 128 KiB afresh).
      const pieces = m.data.map((p) => Buffer.from(p.buffer, p.byteOffset, p.byteLength));
      const bytes = pieces.reduce((a, p) => a + p.byteLength, 0);
      const ack = () => send({ type: 'ack', id: m.id, bytes });
      if (pieces.length === 0) ack();
      pieces.forEach((p, i) => source?.write(p, i === pieces.length - 1 ? ack : undefined));
      return;
    }
    case 'end':
      source?.end();
      return;
    case 'abort':
      source?.destroy(new Error(m.message));
  }
});
