// A blob that goes past its declared size is known to be corrupt at that piece: the worker answers then, and the
// rest of its source is not read, or a registry that never ends its body would keep the pull downloading forever.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { unpackInWorker } from '../../../oci/image/unpack-pool.js';

test('a worker fails a blob going past its declared size while its source still sends', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'minicri-overflow-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  let sent = 0;
  // A registry serving an endless body for a layer declared as 200 000 bytes.
  const source = new Readable({
    read() {
      sent += 64 << 10;
      this.push(Buffer.alloc(64 << 10, 0x41));
    },
  });
  t.after(() => source.destroy());
  const unpacking = unpackInWorker(source, join(dir, 'layer'), 'layer', { digest: `sha256:${'0'.repeat(64)}`, size: 200_000, tmp: join(dir, 'blob') });
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within 10 s; ${Math.floor(sent / 2 ** 20)} MiB read from the source by then`)), 10_000);
  });
  try {
    await assert.rejects(Promise.race([unpacking, deadline]), /larger than its declared 200000 bytes/);
    assert.equal(source.destroyed, true, 'the rest of the body is not read');
  } finally {
    clearTimeout(timer);
  }
});
