// An unpack worker's malloc arena stays out of the daemon's forks: after a spawn, writing it again takes no
// page fault per page (copy-on-write), where a thread whose arena is not kept out takes one for every page.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { ARENA_HEAP_BYTES, isArenaHeap } from '../../../core/thread-arena.js';

const hex = (n: number) => n.toString(16).padStart(12, '0');
const line = (start: number, end: number, perms: string, rest = '00000000 00:00 0') => `${hex(start)}-${hex(end)} ${perms} ${rest}`;

test('only anonymous mappings that make up the whole 64 MiB from the base, the first writable, are a heap', () => {
  const base = 0x7f0000000000;
  const end = base + ARENA_HEAP_BYTES;
  const split = base + (20 << 20);
  const before = line(base - 4096, base, 'r--p', '00000000 08:01 1234 /usr/lib/libc.so.6');
  assert.equal(isArenaHeap([before, line(base, split, 'rw-p'), line(split, end, '---p')].join('\n'), base), true);
  assert.equal(isArenaHeap(line(base, end, 'rw-p'), base), true, 'all of it in use');
  assert.equal(isArenaHeap(line(base, split, 'rw-p'), base), false, 'the rest not mapped');
  assert.equal(isArenaHeap([line(base - 4096, split, 'rw-p'), line(split, end, '---p')].join('\n'), base), false, 'begins before the base');
  assert.equal(isArenaHeap([line(base, split, 'rw-p'), line(split, end + 4096, '---p')].join('\n'), base), false, 'runs past the end');
  assert.equal(isArenaHeap([line(base, split, 'rw-p'), line(split + 4096, end, '---p')].join('\n'), base), false, 'a gap');
  assert.equal(isArenaHeap(line(base, end, 'rw-p', '00000000 08:01 99 /tmp/file'), base), false, 'a file');
  assert.equal(isArenaHeap([line(base, split, '---p'), line(split, end, 'rw-p')].join('\n'), base), false, 'not writable at its start');
});

/**
 * Faults the worker thread took writing 16 MiB of its own malloc'd memory again after the main thread spawned a
 * process, with its arena kept out of forks first or not.
 */
async function faultsAfterSpawn(keep: boolean): Promise<{ faults: number; kept: unknown }> {
  const code = `
    const { parentPort, workerData } = require('node:worker_threads');
    const { readFileSync } = require('node:fs');
    const faults = () => Number(readFileSync('/proc/thread-self/stat', 'utf8').split(') ')[1].split(' ')[7]);
    // 64 KiB blocks: under glibc's mmap threshold, so from this thread's arena.
    const blocks = Array.from({ length: 256 }, () => Buffer.alloc(64 << 10, 1));
    const kept = workerData.keep ? require(workerData.module).keepThreadArenaFromForks() : false;
    parentPort.once('message', () => {
      const before = faults();
      for (const b of blocks) b.fill(2);
      parentPort.postMessage({ faults: faults() - before, kept });
    });
    parentPort.postMessage('ready');
  `;
  const module = new URL('../../../core/thread-arena.js', import.meta.url).pathname;
  const w = new Worker(code, { eval: true, workerData: { keep, module } });
  try {
    await new Promise((resolve) => w.once('message', resolve));
    assert.equal(spawnSync('true').status, 0, 'the spawn works');
    const result = new Promise<{ faults: number; kept: unknown }>((resolve) => w.once('message', resolve));
    w.postMessage('go');
    return await result;
  } finally {
    await w.terminate();
  }
}

test('a thread whose arena is kept out of forks writes it again after a spawn without a fault per page', async () => {
  const control = await faultsAfterSpawn(false);
  assert.ok(control.faults > 2000, `not kept out: ${control.faults} faults for 4096 pages (copy-on-write)`);
  const kept = await faultsAfterSpawn(true);
  assert.equal(kept.kept, true);
  assert.ok(kept.faults < 200, `kept out: ${kept.faults} faults`);
});
