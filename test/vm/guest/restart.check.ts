// The runtime's unit on a real node (check f): `systemctl restart minicri` keeps the pods (the same ids, ready and
// running, the same processes), and stopping and removing every pod leaves nothing in the guest: no netns, no
// mount, no conmon, no container cgroup, no AppArmor profile loaded for a pod.
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { GuestEnv, sh, until } from './env.js';

const processAlive = (pid: number) => { try { process.kill(pid, 0); return true; } catch { return false; } };

async function netns(): Promise<string[]> {
  return (await readdir('/run/netns').catch(() => [] as string[])).filter((n) => n.startsWith('minicri-'));
}
/** Mount points of minicri's (root filesystems, shm, netns pins). */
async function mounts(): Promise<string[]> {
  return (await readFile('/proc/self/mounts', 'utf8')).split('\n').map((l) => l.split(' ')[1] ?? '')
    .filter((m) => m.includes('minicri') || m.startsWith('/run/netns/') || m.startsWith('/var/run/netns/')).sort();
}
async function conmons(): Promise<string[]> {
  return (await sh('pgrep -a -x conmon')).stdout.split('\n').filter(Boolean);
}
async function profiles(): Promise<string[]> {
  return (await readFile('/sys/kernel/security/apparmor/profiles', 'utf8')).split('\n').filter(Boolean).sort();
}
/** Cgroup directories named by one of these ids. */
async function cgroupsNamed(ids: string[]): Promise<string> {
  const pattern = ids.map((id) => `-name '*${id}*'`).join(' -o ');
  return (await sh(`find /sys/fs/cgroup -mindepth 1 -type d \\( ${pattern} \\)`)).stdout.trim();
}

describe('minicri under systemd in the VM: restarts keep the pods, removal leaves nothing', { timeout: 15 * 60_000 }, () => {
  let env: GuestEnv;
  before(async () => { env = await GuestEnv.start('restart'); });
  after(() => env?.stop());

  it('keeps its pods across systemctl restart minicri, and removing them all leaves nothing', async () => {
    const before = { mounts: await mounts(), profiles: await profiles(), netns: (await netns()).length };
    const pods = [await env.runPod('keep-a'), await env.runPod('keep-b')];
    const containers: string[] = [];
    for (const pod of pods) containers.push(await env.run(pod, 'app', ['sleep', '3600']));
    const pids = await Promise.all(containers.map((id) => env.pid(id)));
    assert.equal((await netns()).length, before.netns + 2, 'each pod has its netns');

    const mainPid = (await sh('systemctl show --value --property=MainPID minicri')).stdout.trim();
    const restart = await sh('systemctl restart minicri');
    assert.equal(restart.exitCode, 0, restart.stderr);
    assert.notEqual((await sh('systemctl show --value --property=MainPID minicri')).stdout.trim(), mainPid, 'a new daemon');
    const rt = env.client.runtime;
    await until('minicri answers after the restart', async () => (await rt.call('Version', { version: 'v1' }, { timeoutMs: 5000 })).runtime_name === 'minicri');
    const ready = (await rt.call('ListPodSandbox', {})).items.filter((p) => p.state === 'SANDBOX_READY').map((p) => p.id);
    for (const pod of pods) assert.ok(ready.includes(pod.id), `pod ${pod.id} is still there and ready`);
    for (const [i, id] of containers.entries()) {
      assert.equal((await env.status(id)).state, 'CONTAINER_RUNNING');
      assert.equal(await env.pid(id), pids[i], 'the same process');
      assert.ok(processAlive(pids[i]!), `the container's process ${pids[i]} runs on`);
    }

    // Every pod of the guest: these and any the other checks left.
    for (const p of (await rt.call('ListPodSandbox', {})).items) await env.removePod(p.id);
    await env.client.removalsSettled(120_000);
    assert.deepEqual((await rt.call('ListPodSandbox', {})).items, [], 'no pod is listed');
    assert.deepEqual(await netns(), [], 'no netns of a pod is left');
    assert.deepEqual((await mounts()).filter((m) => !before.mounts.includes(m)), [], 'no mount of a pod is left');
    assert.deepEqual(await conmons(), [], 'no conmon is left');
    assert.equal(await cgroupsNamed([...pods.map((p) => p.id), ...containers]), '', 'no cgroup of a pod or container is left');
    const loaded = await profiles();
    assert.deepEqual(loaded.filter((p) => !before.profiles.includes(p)), [], 'no AppArmor profile was loaded for a pod and left');
    assert.deepEqual(loaded.filter((p) => p.startsWith('minicri') && !/^minicri-default\S* \(enforce\)$/.test(p)), [], 'no profile of minicri\'s but its default');
    for (const pid of pids) assert.equal(processAlive(pid), false, `the container's process ${pid} is gone`);
    const doctor = await sh('minicri doctor');
    assert.equal(doctor.exitCode, 0, `minicri doctor: ${doctor.stdout}${doctor.stderr}`);
  });
});
