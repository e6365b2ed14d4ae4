import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import type { FromWorker, ToWorker } from '../../../oci/image/unpack-pool.js';

test('an unpack worker answers a layer once, though several pieces were queued behind the one that made its blob bad', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'minicri-worker-replies-'));
  const worker = new Worker(new URL('../../../oci/image/unpack-worker.js', import.meta.url));
  t.after(async () => { await worker.terminate(); rmSync(dir, { recursive: true, force: true }); });
  const replies: FromWorker[] = [];
  let answered: () => void;
  const firstAnswer = new Promise<void>((resolve) => { answered = resolve; });
  worker.on('message', (m: FromWorker) => { replies.push(m); if (m.type !== 'ack') answered(); });
  const post = (m: ToWorker) => worker.postMessage(m);
  post({ type: 'start', id: 1, dest: join(dir, 'layer'), what: 'layer', blob: { digest: `sha256:${'0'.repeat(64)}`, size: 1000 } });
  // Four messages sent before any answer, as the main thread keeps up to 2 MiB in flight: the first goes over.
  for (let i = 0; i < 4; i++) post({ type: 'chunk', id: 1, data: [new Uint8Array(64 << 10)] });
  post({ type: 'end', id: 1 });
  await firstAnswer;
  // Any second answer would follow at once, from the pieces queued behind.
  await new Promise((r) => setTimeout(r, 200));
  const answers = replies.filter((m) => m.type !== 'ack');
  assert.equal(answers.length, 1, JSON.stringify(answers));
  assert.match((answers[0] as { message: string }).message, /larger than its declared 1000 bytes/);
});
