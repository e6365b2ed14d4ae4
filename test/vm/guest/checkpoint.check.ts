// CheckpointContainer with Debian's own CRIU on Debian's kernel (check e): `criu check` passes first, then a
// running counter is checkpointed; the archive holds CRIU's images and the counter keeps counting.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { GuestEnv, sh, until } from './env.js';

const COUNTER = ['sh', '-c', 'i=0; while :; do i=$((i+1)); echo $i > /counter; sleep 0.2; done'];

describe('CheckpointContainer in the VM with Debian\'s CRIU', { timeout: 15 * 60_000 }, () => {
  let env: GuestEnv;
  let dir: string;
  before(async () => {
    dir = await mkdtemp('/var/tmp/minicri-vm-ckpt-');
    env = await GuestEnv.start('checkpoint');
  });
  after(async () => {
    await env?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('has a CRIU that works on this kernel', async () => {
    console.log(`criu --version: ${(await sh('criu --version')).stdout.replace(/\n/g, ' ').trim()}`);
    const check = await sh('criu check');
    assert.equal(check.exitCode, 0, `criu check: ${check.stdout}${check.stderr}`);
    assert.match(check.stdout + check.stderr, /Looks good/);
  });

  it('checkpoints a running counter: the archive holds CRIU\'s images and the counter runs on', async () => {
    const pod = await env.runPod('checkpoint');
    const id = await env.run(pod, 'counter', COUNTER);
    const counter = async () => Number((await env.exec(id, 'cat /counter')).stdout.trim());
    await until('the counter counts', async () => (await counter()) >= 3);
    const location = join(dir, 'counter.tar');
    await env.client.runtime.call('CheckpointContainer', { container_id: id, location, timeout: 600 }, { timeoutMs: 660_000 });
    const members = (await sh(`tar -tf ${location}`)).stdout.split('\n').filter(Boolean);
    const images = members.filter((m) => /^checkpoint\/[^/]+\.img$/.test(m));
    assert.ok(images.includes('checkpoint/inventory.img'), `CRIU's inventory in the archive: ${members.join(' ')}`);
    assert.ok(images.some((m) => /^checkpoint\/pages-\d+\.img$/.test(m)), `CRIU's memory pages in the archive: ${members.join(' ')}`);
    console.log(`the archive holds ${images.length} CRIU images`);
    // Real images, not stand-ins: CRIU's inventory begins with its magic number, 0x58313116.
    const magic = (await sh(`tar -xOf ${location} checkpoint/inventory.img | od -A n -t x4 -N 4`)).stdout.trim();
    assert.equal(magic, '58313116', 'the inventory image begins with CRIU\'s inventory magic');
    assert.equal((await env.status(id)).state, 'CONTAINER_RUNNING', 'the container is still running');
    const after = await counter();
    await until('the counter counts on after the checkpoint', async () => (await counter()) > after);
  });
});
