// The worker side of unpack-pool.ts: unpacks one layer at a time from the chunks the main thread sends, so
// gunzip's bookkeeping, the diff-id hash, the tar parsing, the file writes and their garbage stay off the
// thread that serves CRI calls.
import { PassThrough } from 'node:stream';
import { parentPort } from 'node:worker_threads';
import { MinicriError } from '../../core/errors.js';
import { silentLogger } from '../../core/log.js';
import { unpackLayer } from './unpack.js';
import type { FromWorker, ToWorker } from './unpack-pool.js';

const port = parentPort!;
let source: PassThrough | undefined;

function send(m: FromWorker): void {
  port.postMessage(m);
}

port.on('message', (m: ToWorker) => {
  switch (m.type) {
    case 'start': {
      const s = new PassThrough({ highWaterMark: 1 << 20 });
      source = s;
      unpackLayer(s, m.dest, m.what, silentLogger).then(
        (r) => send({ type: 'done', diffId: r.diffId, bytes: r.bytes }),
        (err: Error) => send({ type: 'error', code: err instanceof MinicriError ? err.code : undefined, message: err.message }),
      ).finally(() => { if (source === s) source = undefined; });
      return;
    }
    case 'chunk': {
      const n = m.data.byteLength;
      source?.write(Buffer.from(m.data.buffer, m.data.byteOffset, n), () => send({ type: 'ack', bytes: n }));
      return;
    }
    case 'end':
      source?.end();
      return;
    case 'abort':
      source?.destroy(new Error(m.message));
  }
});
