// AppArmor on a node that enforces it (check b): kubelet's default request (no field, or RuntimeDefault) runs
// under minicri's own default profile in enforce mode; Unconfined runs unconfined; a Localhost profile runs when it
// is loaded and is refused by name when it is not; a privileged container gets no default profile. And the check
// only AppArmor can fail: with CAP_SYS_ADMIN, no seccomp and no masked paths, `mount` is refused by the default
// profile (the kernel logs apparmor="DENIED") and allowed when Unconfined.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { ContainerConfig } from '../../../gen/runtime/v1/ContainerConfig.js';
import type { SecurityProfile } from '../../../gen/runtime/v1/SecurityProfile.js';
import { GuestEnv, grpcError, sh, type Pod } from './env.js';

/** minicri's default profile, in enforce mode (its name may carry a version suffix). */
const DEFAULT_LABEL = /^minicri-default\S* \(enforce\)$/;
const LOCALHOST = 'minicri-vm-test-localhost';
const NOT_LOADED = 'minicri-vm-test-not-loaded';
// A profile of the test's own: everything allowed but reading one file, so it is told apart from unconfined.
const LOCALHOST_PROFILE = `abi <abi/3.0>,
profile ${LOCALHOST} flags=(attach_disconnected,mediate_deleted) {
  file,
  network,
  capability,
  signal,
  unix,
  ptrace,
  mount,
  umount,
  pivot_root,
  deny /etc/hostname r,
}
`;

const withAppArmor = (apparmor?: SecurityProfile, more: (c: ContainerConfig) => void = () => {}) => (c: ContainerConfig) => {
  c.linux = { security_context: apparmor ? { apparmor } : {} };
  more(c);
};

/** What a container needs to try `mount` with nothing but AppArmor in the way. */
const mountCapable = (c: ContainerConfig) => {
  c.linux!.security_context = {
    ...c.linux!.security_context,
    capabilities: { add_capabilities: ['CAP_SYS_ADMIN'] },
    seccomp: { profile_type: 'Unconfined' },
    masked_paths: [], readonly_paths: [],
  };
};

/** Kernel log lines of AppArmor denials of mount. */
async function mountDenials(): Promise<string[]> {
  return (await sh('dmesg')).stdout.split('\n').filter((l) => l.includes('apparmor="DENIED"') && l.includes('operation="mount"'));
}

describe('AppArmor in the VM: minicri\'s default profile, Unconfined, Localhost, and a mount only AppArmor refuses', { timeout: 15 * 60_000 }, () => {
  let env: GuestEnv;
  let pod: Pod;
  let dir: string;
  before(async () => {
    assert.equal((await sh('cat /sys/module/apparmor/parameters/enabled')).stdout.trim(), 'Y', 'AppArmor is enabled in the guest');
    dir = await mkdtemp('/var/tmp/minicri-vm-aa-');
    await writeFile(join(dir, LOCALHOST), LOCALHOST_PROFILE);
    const load = await sh(`apparmor_parser -r ${join(dir, LOCALHOST)}`);
    assert.equal(load.exitCode, 0, `apparmor_parser -r: ${load.stderr}`);
    env = await GuestEnv.start('apparmor');
    pod = await env.runPod('apparmor');
  });
  after(async () => {
    await env?.stop();
    if (dir) {
      await sh(`apparmor_parser -R ${join(dir, LOCALHOST)}`);
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('says in Status that AppArmor is enforced', async () => {
    const info = (await env.client.runtime.call('Status', { verbose: true })).info;
    const apparmor = Object.entries(info).filter(([k, v]) => /apparmor/i.test(k) || /apparmor/i.test(v));
    assert.ok(apparmor.length > 0, `Status's verbose info speaks of AppArmor: ${JSON.stringify(info)}`);
    console.log(`Status's AppArmor: ${info.apparmor ?? JSON.stringify(Object.fromEntries(apparmor))}`);
  });

  it('runs a container with no AppArmor field, or RuntimeDefault, under minicri\'s default profile in enforce mode', async () => {
    const none = await env.run(pod, 'default', ['sleep', '3600'], withAppArmor());
    const runtimeDefault = await env.run(pod, 'runtime-default', ['sleep', '3600'], withAppArmor({ profile_type: 'RuntimeDefault' }));
    for (const id of [none, runtimeDefault]) assert.match(await env.apparmorLabel(id), DEFAULT_LABEL);
    const loaded = (await sh('cat /sys/kernel/security/apparmor/profiles')).stdout;
    assert.match(loaded, /^minicri-default\S* \(enforce\)$/m, 'the default profile is loaded in enforce mode');
    // Confined for real: the profile keeps the container from writing the kernel's settings, even as root.
    const write = await env.exec(none, 'echo 1 > /proc/sys/kernel/sysrq');
    assert.notEqual(write.exitCode, 0, 'a write to /proc/sys is refused');
  });

  it('runs a container asking for Unconfined unconfined', async () => {
    const id = await env.run(pod, 'unconfined', ['sleep', '3600'], withAppArmor({ profile_type: 'Unconfined' }));
    assert.equal(await env.apparmorLabel(id), 'unconfined');
  });

  it('runs a container under a Localhost profile that is loaded', async () => {
    const id = await env.run(pod, 'localhost', ['sleep', '3600'], withAppArmor({ profile_type: 'Localhost', localhost_ref: LOCALHOST }));
    assert.equal(await env.apparmorLabel(id), `${LOCALHOST} (enforce)`);
    const read = await env.exec(id, 'cat /etc/hostname');
    assert.notEqual(read.exitCode, 0, 'the profile\'s one denial holds');
  });

  it('refuses a Localhost profile that is not loaded, naming it', async () => {
    await assert.rejects(
      async () => { await env.run(pod, 'not-loaded', ['sleep', '3600'], withAppArmor({ profile_type: 'Localhost', localhost_ref: NOT_LOADED })); },
      grpcError(grpc.status.INVALID_ARGUMENT, new RegExp(`${NOT_LOADED}[^]*(not loaded|not found)|(not loaded|not found)[^]*${NOT_LOADED}`)),
    );
  });

  it('gives a privileged container no default profile', async () => {
    const privileged = await env.runPod('apparmor-privileged', (c) => { c.linux!.security_context!.privileged = true; });
    const id = await env.run(privileged, 'privileged', ['sleep', '3600'], (c) => { c.linux = { security_context: { privileged: true } }; });
    assert.equal(await env.apparmorLabel(id), 'unconfined');
  });

  it('refuses mount under the default profile (the kernel logs the denial) and allows it when Unconfined', async () => {
    const denialsBefore = await mountDenials();
    const confined = await env.run(pod, 'mount-default', ['sleep', '3600'], withAppArmor(undefined, mountCapable));
    assert.match(await env.apparmorLabel(confined), DEFAULT_LABEL);
    const refused = await env.exec(confined, 'mkdir -p /mnt && mount -t tmpfs none /mnt && echo mounted');
    assert.notEqual(refused.exitCode, 0, `mount under the default profile: ${refused.stdout}${refused.stderr}`);
    assert.match(refused.stderr, /denied/i);
    const denials = (await mountDenials()).filter((l) => !denialsBefore.includes(l));
    assert.ok(denials.some((l) => /profile="minicri-default/.test(l)), `apparmor="DENIED" operation="mount" in the kernel log: ${denials.join('\n')}`);
    console.log(`kernel log: ${denials[0]}`);

    const unconfined = await env.run(pod, 'mount-unconfined', ['sleep', '3600'], withAppArmor({ profile_type: 'Unconfined' }, mountCapable));
    const allowed = await env.exec(unconfined, 'mkdir -p /mnt && mount -t tmpfs none /mnt && echo mounted');
    assert.equal(allowed.exitCode, 0, `mount when Unconfined: ${allowed.stderr}`);
    assert.equal(allowed.stdout.trim(), 'mounted');
  });
});
