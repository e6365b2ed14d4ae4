import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { execa } from 'execa';
import { FailedPrecondition, NotFound } from '../../../core/errors.js';
import { releaseCreatedInit } from '../../../oci/runtime/exec-fifo.js';

/** A stand-in for runc's init: blocks opening the fifo for writing, writes its byte, then "execs" (exits). */
function fakeInit(fifo: string, byte = '0') {
  const child = spawn('sh', ['-c', `printf '${byte}' > "$0"`, fifo], { stdio: 'ignore' });
  return new Promise<number | null>((resolve) => child.once('exit', resolve));
}

/** The daemon's open file descriptors. */
const openFds = () => readdirSync('/proc/self/fd').length;

describe('runc start in the daemon: the exec fifo', () => {
  let root: string;
  let n = 0;
  before(async () => { root = await mkdtemp(join(tmpdir(), 'minicri-fifo-')); });
  after(() => rm(root, { recursive: true, force: true }));
  const container = async () => {
    const id = `c${++n}`;
    await mkdir(join(root, id));
    await execa('mkfifo', [join(root, id, 'exec.fifo')]);
    return id;
  };

  it('reads the init\'s byte and removes the fifo, whether the init is waiting already or comes later', async () => {
    const waiting = await container();
    const init = fakeInit(join(root, waiting, 'exec.fifo'));
    await releaseCreatedInit(root, waiting, async () => 'created');
    assert.equal(await init, 0);
    assert.equal(existsSync(join(root, waiting, 'exec.fifo')), false);

    const late = await container();
    const released = releaseCreatedInit(root, late, async () => 'created');
    await new Promise((r) => setTimeout(r, 120)); // past a liveness check or two
    const lateInit = fakeInit(join(root, late, 'exec.fifo'));
    await released;
    assert.equal(await lateInit, 0);
    assert.equal(existsSync(join(root, late, 'exec.fifo')), false);
  });

  it('refuses, fifo kept, once the init died without writing, or another start took the byte', async () => {
    const dead = await container();
    await assert.rejects(releaseCreatedInit(root, dead, async () => 'stopped'),
      (err: unknown) => err instanceof FailedPrecondition && /process is already dead/.test(err.message));
    assert.equal(existsSync(join(root, dead, 'exec.fifo')), true);
    const taken = await container();
    await assert.rejects(releaseCreatedInit(root, taken, async () => 'running'), /already running/);
  });

  it('answers as runc start would when the fifo went away after the state check, not INTERNAL', async () => {
    const id = `c${++n}`;
    await mkdir(join(root, id)); // no fifo: removed with the container, or by another start
    await assert.rejects(releaseCreatedInit(root, id, async () => undefined),
      (err: unknown) => err instanceof NotFound && /does not exist/.test(err.message));
    await assert.rejects(releaseCreatedInit(root, id, async () => 'running'),
      (err: unknown) => err instanceof FailedPrecondition && /already running/.test(err.message));
    await assert.rejects(releaseCreatedInit(root, id, async () => 'stopped'),
      (err: unknown) => err instanceof FailedPrecondition && /already dead/.test(err.message));
  });

  it('closes the fifo\'s descriptor when it cannot be watched (not a fifo)', async () => {
    const id = `c${++n}`;
    await mkdir(join(root, id));
    await writeFile(join(root, id, 'exec.fifo'), '');
    const before = openFds();
    await assert.rejects(releaseCreatedInit(root, id, async () => 'created'));
    assert.equal(openFds(), before);
  });

  it('calls an init that opened the fifo and died without writing dead, not running', async () => {
    const id = await container();
    let exited = false;
    // Opens the fifo for writing (waiting for a reader), writes nothing, exits.
    const child = spawn('sh', ['-c', ': > "$0"', join(root, id, 'exec.fifo')], { stdio: 'ignore' });
    child.once('exit', () => { exited = true; });
    await assert.rejects(releaseCreatedInit(root, id, async () => (exited ? 'stopped' : 'created')),
      (err: unknown) => err instanceof FailedPrecondition && /process is already dead/.test(err.message));
  });
});
