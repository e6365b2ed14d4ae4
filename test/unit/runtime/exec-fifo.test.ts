import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { execa } from 'execa';
import { FailedPrecondition } from '../../../core/errors.js';
import { releaseCreatedInit } from '../../../oci/runtime/exec-fifo.js';

/** A stand-in for runc's init: blocks opening the fifo for writing, writes its byte, then "execs" (exits). */
function fakeInit(fifo: string, byte = '0') {
  const child = spawn('sh', ['-c', `printf '${byte}' > "$0"`, fifo], { stdio: 'ignore' });
  return new Promise<number | null>((resolve) => child.once('exit', resolve));
}

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
});
