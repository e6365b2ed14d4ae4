// What kubelets 1.30-1.36 send beyond the older CRI, through the real daemon: stop_signal and the resolved
// user in ContainerStatus, seccomp profiles given the legacy way, CDI devices and image volumes.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { APP_GID, APP_UID, EXTRA_GID } from '../../support/busybox-image.js';
import { ContainerEnv, sleep } from './env.js';

function grpcCode(code: grpc.status, details?: RegExp) {
  return (err: grpc.ServiceError) => {
    assert.equal(err.code, code, `expected ${grpc.status[code]}, got ${grpc.status[err.code]}: ${err.details}`);
    if (details) assert.match(err.details, details);
    return true;
  };
}

describe('the CRI of current kubelets', () => {
  let env: ContainerEnv;
  before(async () => { env = await ContainerEnv.start(74); });
  after(() => env.stop());

  it('stops with the config stop_signal over the image StopSignal and reports it and the resolved user', async (t) => {
    const pod = await env.runPod(t, 'stopsig');
    // The usr1 image says SIGUSR1; the config's SIGUSR2 wins.
    const trap = "trap 'echo got USR1; exit 4' USR1; trap 'echo got USR2; exit 5' USR2; while :; do sleep 0.1; done";
    const usr2 = await env.run(pod, 'usr2', ['sh', '-c', trap], (c) => { c.stop_signal = 'SIGUSR2'; }, env.images.usr1);
    const usr1 = await env.run(pod, 'usr1', ['sh', '-c', trap], (c) => { c.stop_signal = 'SIGUSR1'; });
    const plain = await env.run(pod, 'plain', ['sleep', '1000'], (c) => {
      c.linux = { security_context: { run_as_user: { value: APP_UID }, supplemental_groups: [4242] } };
    }, env.images.app);
    assert.equal((await env.status(usr2)).stop_signal, 'SIGUSR2');
    assert.equal((await env.status(usr1)).stop_signal, 'SIGUSR1');
    assert.equal((await env.status(plain)).stop_signal, 'SIGTERM');
    const user = (await env.status(plain)).user?.linux;
    assert.deepEqual([user?.uid, user?.gid, [...(user?.supplemental_groups ?? [])].sort()],
      [String(APP_UID), String(APP_GID), [String(APP_GID), String(EXTRA_GID), '4242'].sort()]);
    assert.deepEqual((await env.status(usr1)).user?.linux?.uid, '0');
    await sleep(300); // let the shells install their traps
    for (const [id, code, line] of [[usr2, 5, 'got USR2'], [usr1, 4, 'got USR1']] as const) {
      await env.rt.runtime.call('StopContainer', { container_id: id, timeout: 10 });
      const s = await env.status(id);
      assert.equal(s.exit_code, code);
      assert.match(await readFile(s.log_path, 'utf8'), new RegExp(`stdout F ${line}`));
    }
  });

  it('refuses a stop_signal that is no CRI signal and leaves nothing behind', async (t) => {
    const pod = await env.runPod(t, 'badsig');
    const before = (await env.rt.runtime.call('ListContainers', {})).containers.length;
    await assert.rejects(env.create(pod, 'bad', ['true'], (c) => { (c as { stop_signal: unknown }).stop_signal = 99; }),
      grpcCode(grpc.status.INVALID_ARGUMENT, /stop_signal 99/));
    assert.equal((await env.rt.runtime.call('ListContainers', {})).containers.length, before);
  });
});
