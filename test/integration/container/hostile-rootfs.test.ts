// Images whose /etc/passwd and /etc/group are no regular files, through the real daemon (#31 row 1): a FIFO,
// a character device (/dev/zero's numbers), a block device (/dev/loop0's), links into /proc and a link loop.
// Each container asks for a clear error (or runs, where the files only are absent), nothing of it is left,
// and the daemon keeps answering other calls meanwhile and stops on time at the end.
import assert from 'node:assert/strict';
import { after, before, describe, it, type TestContext } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { ContainerConfig } from '../../../gen/runtime/v1/ContainerConfig.js';
import { pushBusybox } from '../../support/busybox-image.js';
import type { TarEntry } from '../../support/test-images.js';
import { ContainerEnv, type Pod } from './env.js';

function grpcCode(code: grpc.status, details?: RegExp) {
  return (err: grpc.ServiceError) => {
    assert.equal(err.code, code, `expected ${grpc.status[code]}, got ${grpc.status[err.code]}: ${err.details}`);
    if (details) assert.match(err.details, details);
    return true;
  };
}

/** A layer over busybox replacing etc/passwd and etc/group with `entry(name)`. */
const over = (entry: (name: 'passwd' | 'group') => TarEntry[]) => ({ entries: [...entry('passwd'), ...entry('group')] });

const HOSTILE: Record<string, (name: 'passwd' | 'group') => TarEntry[]> = {
  fifo: (name) => [{ name: `etc/${name}`, type: 'fifo', mode: 0o644 }],
  chardev: (name) => [{ name: `etc/${name}`, type: 'character-device', devmajor: 1, devminor: 5, mode: 0o644 }],
  blockdev: (name) => [{ name: `etc/${name}`, type: 'block-device', devmajor: 7, devminor: 0, mode: 0o644 }],
  proclink: (name) => [
    { name: `etc/${name}`, type: 'symlink', linkname: name === 'passwd' ? '/proc/self/environ' : '../../../proc/1/environ' },
  ],
  loop: (name) => [
    { name: `etc/${name}`, type: 'symlink', linkname: `${name}.next` },
    { name: `etc/${name}.next`, type: 'symlink', linkname: `/etc/${name}` },
  ],
};

const LIVENESS_MS = 10_000;
/** A daemon stuck on a file fails the test instead of hanging it. */
const STUCK = { timeout: 60_000 };
const literal = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** INVALID_ARGUMENT naming the file, the image and what is wrong. */
const refusal = (image: string, what: string) =>
  grpcCode(grpc.status.INVALID_ARGUMENT, new RegExp(`/etc/(passwd|group) of image ${literal(image)} ${what}`));

describe('images whose passwd and group are no regular files', () => {
  let env: ContainerEnv;
  const images: Record<string, string> = {};
  before(async () => {
    env = await ContainerEnv.start(151);
    for (const [tag, entry] of Object.entries(HOSTILE)) {
      images[tag] = await pushBusybox(env.registry, `hostile-${tag}`, {}, [over(entry)]);
      await env.rt.image.call('PullImage', { image: { image: images[tag] } });
    }
  });
  after(async () => {
    // process.exit paths are not stuck: the daemon stops within the deadline after all of it.
    const stopped = env.stop();
    const late = new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), 30_000).unref());
    assert.notEqual(await Promise.race([stopped.then(() => 'stopped' as const), late]), 'late', 'the daemon stops within 30 s');
  });

  const asUser = (name: string) => (c: ContainerConfig) => { c.linux = { security_context: { run_as_username: name } }; };
  const asUid = (uid: number) => (c: ContainerConfig) => { c.linux = { security_context: { run_as_user: { value: uid } } }; };

  /** A plain pod runs and is removed, each within the liveness deadline. */
  async function stillAnswers(t: TestContext, name: string): Promise<void> {
    const begun = Date.now();
    const pod = await env.runPod(t, name);
    const ran = Date.now() - begun;
    assert.ok(ran < LIVENESS_MS, `RunPodSandbox of a plain pod took ${ran} ms`);
    assert.equal((await env.rt.runtime.call('PodSandboxStatus', { pod_sandbox_id: pod.id })).status?.state, 'SANDBOX_READY');
  }

  /** No container of `pod` is left by refused creations. */
  async function nothingLeft(pod: Pod): Promise<void> {
    const { containers } = await env.rt.runtime.call('ListContainers', { filter: { pod_sandbox_id: pod.id } });
    assert.deepEqual(containers.map((c) => c.metadata?.name), []);
  }

  it('refuses FIFOs without opening them and keeps serving', STUCK, async (t) => {
    const pod = await env.runPod(t, 'fifo');
    const refused = refusal(images.fifo!, 'is a FIFO, not a regular file');
    // Two containers: before, each blocked one of libuv's four threads for good.
    await assert.rejects(env.create(pod, 'named', ['true'], asUser('app'), images.fifo), refused);
    await assert.rejects(env.create(pod, 'numeric', ['true'], asUid(1000), images.fifo), refused);
    await nothingLeft(pod);
    await stillAnswers(t, 'after-fifo');
  });

  for (const [tag, what] of [['chardev', 'a character device'], ['blockdev', 'a block device']] as const) {
    it(`refuses ${what} without reading it`, STUCK, async (t) => {
      const pod = await env.runPod(t, tag);
      await assert.rejects(env.create(pod, 'named', ['true'], asUser('app'), images[tag]),
        refusal(images[tag]!, `is ${what}, not a regular file`));
      await nothingLeft(pod);
      await stillAnswers(t, `after-${tag}`);
    });
  }

  it('resolves links into /proc inside the image: absent files, so a numeric user runs and a named one is unknown', STUCK, async (t) => {
    const pod = await env.runPod(t, 'proclink');
    assert.equal(await env.output(pod, 'numeric', 'id -u; id -g', asUid(1000), images.proclink), '1000\n0');
    await assert.rejects(env.create(pod, 'named', ['true'], asUser('app'), images.proclink),
      grpcCode(grpc.status.INVALID_ARGUMENT, /user "app" is not in the image's \/etc\/passwd/));
    await stillAnswers(t, 'after-proclink');
  });

  it('refuses a symlink loop', STUCK, async (t) => {
    const pod = await env.runPod(t, 'loop');
    await assert.rejects(env.create(pod, 'numeric', ['true'], asUid(0), images.loop),
      refusal(images.loop!, 'goes through more than 40 symbolic links'));
    await nothingLeft(pod);
    await stillAnswers(t, 'after-loop');
  });
});
