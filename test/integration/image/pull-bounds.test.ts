// Pulls are bounded and visible: a stalled blob download fails over to the next endpoint (or fails, naming
// blob and endpoint); a client that gives up stops its pull without leaving anything, while another client's
// pull of the same image completes; a slow pull logs its progress and is reported as slow.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import pino from 'pino';
import { DeadlineExceeded } from '../../../core/errors.js';
import { imageEnv } from '../../support/image-env.js';
import { makeDaemonDirs, removeDirs, TestDaemon } from '../../support/daemon.js';
import { freePort, startRegistry, type TestRegistry } from '../../support/registry.js';
import { startRegistryProxy } from '../../support/registry-proxy.js';
import { buildImage, pushImage, type BuiltImage } from '../../support/test-images.js';
import { waitFor } from '../../support/wait.js';

function capturingLogger(): { log: pino.Logger; lines: Array<{ msg: string; [k: string]: unknown }> } {
  const lines: Array<{ msg: string }> = [];
  const log = pino({ level: 'debug' }, { write(s: string) { lines.push(JSON.parse(s) as { msg: string }); } });
  return { log, lines };
}

const names = async (dir: string) => (await readdir(dir).catch(() => [] as string[])).sort();

let reg: TestRegistry;
let small: BuiltImage;
/** Two layers of incompressible data, ~400 KB: seconds when throttled to 100 KB/s. */
let big: BuiltImage;
before(async () => {
  reg = await startRegistry();
  small = await buildImage([{ entries: [{ name: 'hello', data: 'hello\n' }] }], { Cmd: ['/hello'] });
  big = await buildImage([0, 1].map((i) => ({ entries: [{ name: `data/${i}`, data: randomBytes(200_000) }], compression: 'gzip' as const })), { Cmd: ['/x'] });
  await pushImage(reg, 'bounds/small', ['v1'], small);
  await pushImage(reg, 'bounds/big', ['v1'], big);
});
after(async () => { await reg?.stop(); });

describe('stalled downloads', () => {
  test('a mirror that sends headers then stalls is given up after the stall time; the registry serves the pull', async (t) => {
    const stalling = await startRegistryProxy(reg.url, { stallBlobs: true });
    t.after(() => stalling.stop());
    const { log, lines } = capturingLogger();
    const { images } = await imageEnv(t, { mirrors: { [reg.host]: { endpoints: [stalling.url] } }, insecure: [] }, { stallTimeoutMs: 500, log });
    const r = await images.pull(`${reg.host}/bounds/small:v1`);
    assert.equal(r.id, small.configDigest);
    assert.ok(stalling.requests.some((q) => q.path.includes('/blobs/')), 'the mirror was asked for a blob');
    const failover = lines.find((l) => l.msg === 'blob download failed, trying the next endpoint');
    assert.ok(failover && String(failover.err).includes('stalled') && String(failover.err).includes(stalling.url), JSON.stringify(lines));
  });

  test('with no other endpoint the pull fails with DeadlineExceeded naming blob and endpoint, and stores nothing', async (t) => {
    const stalling = await startRegistryProxy(reg.url, { stallBlobs: true });
    t.after(() => stalling.stop());
    const { images, rootDir } = await imageEnv(t, { mirrors: { 'registry.example.com': { endpoints: [stalling.url], mirrorsOnly: true } }, insecure: [] }, { stallTimeoutMs: 500 });
    await assert.rejects(images.pull('registry.example.com/bounds/small:v1'), (e: Error) =>
      e instanceof DeadlineExceeded && e.message.includes(`blob ${small.configDigest}`) && e.message.includes(stalling.url) && /stalled/.test(e.message));
    assert.deepEqual(await names(join(rootDir, 'blobs', 'sha256')), []);
    assert.deepEqual(await names(join(rootDir, 'tmp')), []);
  });
});

describe('progress', () => {
  test('a throttled pull logs progress lines and is reported as slow', async (t) => {
    const slow = await startRegistryProxy(reg.url, { throttleBytesPerSecond: 200_000 });
    t.after(() => slow.stop());
    const { log, lines } = capturingLogger();
    const { images } = await imageEnv(t, { mirrors: { 'registry.example.com': { endpoints: [slow.url], mirrorsOnly: true } }, insecure: [] },
      { progressIntervalMs: 200, stallTimeoutMs: 1000, log });
    await images.pull('registry.example.com/bounds/big:v1');
    const progress = lines.filter((l) => l.msg === 'image pull in progress');
    assert.ok(progress.length >= 2, JSON.stringify(lines.map((l) => l.msg)));
    const last = progress[progress.length - 1]!;
    assert.equal(last.layers, 2);
    assert.ok(typeof last.bytes === 'number' && last.bytes > 0 && typeof last.mbPerSecond === 'number');
    assert.ok(lines.some((l) => l.msg.startsWith('image pull is slow')), 'reported as slow');
  });
});

describe('a client that gives up', () => {
  test('a pull whose deadline passes leaves nothing; another client\'s pull of the same image completes', async () => {
    const slow = await startRegistryProxy(reg.url, { throttleBytesPerSecond: 100_000 });
    const port = await freePort();
    const dirs = makeDaemonDirs(`metrics_address = "127.0.0.1:${port}"\n[registries]\nstall_timeout_seconds = 30\n[registries.mirrors."registry.example.com"]\nendpoints = ["${slow.url}"]\nmirrors_only = true`);
    const daemon = await TestDaemon.start(dirs);
    const image = { image: 'registry.example.com/bounds/big:v1' };
    const store = join(dirs.rootDir, 'images');
    const leftovers = async () => {
      const db = new Database(join(dirs.rootDir, 'minicri.db'), { readonly: true });
      try {
        const intents = (db.prepare('SELECT count(*) AS n FROM records WHERE kind = ?').get('image-pull') as { n: number }).n;
        return { blobs: await names(join(store, 'blobs', 'sha256')), layers: await names(join(store, 'layers')), tmp: await names(join(store, 'tmp')), intents };
      } finally {
        db.close();
      }
    };
    // What the daemon holds before any pull: its built-in pause image.
    const empty = await leftovers();
    const sample = async (series: string) => {
      const line = (await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()).split('\n').find((l) => l.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.slice(series.length + 1));
    };
    try {
      assert.deepEqual([empty.tmp, empty.intents], [[], 0]);
      // Alone: the deadline passes mid-transfer and the pull stops.
      await assert.rejects(daemon.client.image.call('PullImage', { image }, { timeoutMs: 1500 }), /DEADLINE_EXCEEDED|Deadline exceeded/i);
      await waitFor(async () => JSON.stringify(await leftovers()) === JSON.stringify(empty), 10_000, 'the cut-off pull to clean up');
      assert.deepEqual(await leftovers(), empty);
      const transferred = slow.requests.filter((q) => q.path.includes('/blobs/')).length;

      // Together: one client gives up, the other's pull goes on over the same transfer.
      const patient = daemon.client.image.call('PullImage', { image }, { timeoutMs: 120_000 });
      await assert.rejects(daemon.client.image.call('PullImage', { image }, { timeoutMs: 1500 }), /DEADLINE_EXCEEDED|Deadline exceeded/i);
      assert.ok((await sample('minicri_image_pulls_in_flight'))! >= 1, 'the patient pull is still running');
      const { image_ref: id } = await patient;
      assert.equal(await sample('minicri_image_pulls_in_flight'), 0);
      assert.ok((await sample('minicri_image_pull_bytes_total'))! >= 400_000, 'the layers\' bytes are counted');
      assert.equal(id, big.configDigest);
      const blobReads = slow.requests.filter((q) => q.path.includes('/blobs/')).slice(transferred).map((q) => q.path).sort();
      assert.deepEqual(blobReads, [...new Set(blobReads)], 'each blob read once: the two pulls shared their transfers');
      assert.equal(blobReads.length, 3, `config and two layers: ${blobReads.join(' ')}`);
      await daemon.client.image.call('RemoveImage', { image });
      await waitFor(async () => JSON.stringify(await leftovers()) === JSON.stringify(empty), 10_000, 'the image to be removed');
    } finally {
      await daemon.stop();
      await slow.stop();
      removeDirs(dirs);
    }
  });
});
