// The worker side of unpack-pool.ts: unpacks layers from the chunks the main thread sends, several at once,
// so gunzip's bookkeeping, the diff-id hash, the tar parsing, the file writes and their garbage stay off the
// thread that serves CRI calls; for a download, the blob's own hash (and file, where blobs are kept) too.
import { flushCompileCache } from 'node:module';
import { parentPort } from 'node:worker_threads';
import { causeWhere, MinicriError } from '../../core/errors.js';
import { LayerFeed } from './layer-feed.js';
import type { FromWorker, ToWorker } from './unpack-pool.js';

// What V8 compiled of this worker's modules, kept for the next worker (see unpack-pool.ts) now rather than when
// the worker ends: a daemon killed with SIGKILL takes its workers with it before that.
flushCompileCache();

const port = parentPort!;

/** A layer under way: its feed once open, and its pieces' turn (each taken only after the one before). */
interface Layer { feed: Promise<LayerFeed>; turn: Promise<unknown> }
const layers = new Map<number, Layer>();

function send(m: FromWorker): void {
  port.postMessage(m);
}

/** The system call error behind `err` (itself or a cause), so the main thread can tell a full disk from a bug. */
function systemError(err: unknown): { errno?: string; path?: string } {
  const e = causeWhere(err, (c) => typeof c.code === 'string' && /^E[A-Z0-9]+$/.test(c.code));
  return e ? { errno: e.code, ...(e.path ? { path: e.path } : {}) } : {};
}

/** Tells the main thread why `id` failed: an unpack's own verdict, or the system error behind it. */
function sendError(id: number, err: Error): void {
  send({ type: 'error', id, code: err instanceof MinicriError ? err.code : undefined, message: err.message, ...systemError(err) });
}

/** Runs `step` on the layer's feed after whatever it is doing: pieces are written in the order they came. */
function after(layer: Layer, step: (feed: LayerFeed) => unknown): void {
  layer.turn = layer.turn.then(async () => step(await layer.feed)).catch(() => undefined);
}

/**
 * The layer's result, once: its last message, after which what still comes for it is dropped. Pieces already
 * queued behind a bad blob each see it failed, and all but the first find it answered.
 */
function finish(id: number, layer: Layer): void {
  if (layers.get(id) !== layer) return;
  layers.delete(id);
  after(layer, (feed) => feed.end().then(
    (r) => send({ type: 'done', id, diffId: r.diffId, bytes: r.bytes }),
    (err: Error) => sendError(id, err),
  ));
}

port.on('message', (m: ToWorker) => {
  const layer = layers.get(m.id);
  switch (m.type) {
    case 'parse':
      // The JSON checks (zod) load with the first parse: a worker that only unpacks starts sooner, and its
      // smaller heap is quicker to collect, which it does every few MiB of a big layer.
      import('./manifest.js')
        .then(({ parseDocument }) => send({ type: 'parsed', id: m.id, value: parseDocument(m.job) }))
        .catch((err: Error) => sendError(m.id, err));
      return;
    case 'start': {
      // The blob's own digest check (and file), here too, when the bytes come from the registry.
      const feed = LayerFeed.open(m.dest, m.what, m.blob);
      layers.set(m.id, { feed, turn: feed });
      feed.catch((err: Error) => {
        layers.delete(m.id);
        sendError(m.id, err);
      });
      return;
    }
    case 'chunk': {
      if (!layer) return;
      // Each piece is taken as it came from the socket: joining them took fresh memory for every batch, and its
      // page faults cost more CPU than the hashing (the daemon's malloc maps anything over 128 KiB afresh).
      const pieces = m.data.map((p) => Buffer.from(p.buffer, p.byteOffset, p.byteLength));
      const bytes = pieces.reduce((a, p) => a + p.byteLength, 0);
      after(layer, async (feed) => {
        await feed.takePieces(pieces);
        // A blob known to be bad is answered now: its source may never end (an endless body).
        if (feed.blobFailed) finish(m.id, layer);
        else send({ type: 'ack', id: m.id, bytes });
      });
      return;
    }
    case 'end':
      if (layer) finish(m.id, layer);
      return;
    case 'abort':
      // At once, not after the pieces waiting: one of them may wait on the tar parser.
      if (!layer) return;
      void layer.feed.then((feed) => feed.abort(new Error(m.message)), () => undefined);
      finish(m.id, layer);
  }
});
