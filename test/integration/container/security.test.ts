// What a container sees of itself through the real daemon: users and groups, bind mounts and their
// propagation, capabilities, privileged mode, the default seccomp profile, /proc masks (procMount),
// AppArmor as verbose Status reports it, and PID namespace modes.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { execa } from 'execa';
import { MINICRI_PROFILE_VERSION } from '../../../oci/runtime/apparmor/profile.js';
import { APP_GID, APP_UID, EXTRA_GID } from '../../support/busybox-image.js';
import { ContainerEnv } from './env.js';

/** A temp dir removed (after unmounting anything under it) when the test ends. */
async function tempDir(t: TestContext, prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `minicri-ctest-${prefix}-`));
  t.after(async () => {
    // -R: everything mounted under it too, innermost first.
    await execa('umount', ['-R', dir], { reject: false });
    await rm(dir, { recursive: true, force: true });
  });
  return dir;
}

/** The effective capability mask from /proc/self/status output. */
const capEff = (status: string) => BigInt(`0x${/^CapEff:\s*([0-9a-f]+)/m.exec(status)![1]}`);
const CAP_NET_ADMIN = 12n;

describe('container identity and confinement', () => {
  let env: ContainerEnv;
  before(async () => { env = await ContainerEnv.start(71); });
  after(() => env.stop());

  it('runs as the image user with its groups, or as the uid, gid and groups the config asks for', async (t) => {
    const pod = await env.runPod(t, 'users');
    assert.equal(await env.output(pod, 'root', 'id'), 'uid=0(root) gid=0(root) groups=0(root)');
    assert.equal(await env.output(pod, 'image-user', 'id', undefined, env.images.app),
      `uid=${APP_UID}(app) gid=${APP_GID}(app) groups=${APP_GID}(app),${EXTRA_GID}(extra)`);
    const configured = await env.output(pod, 'config-user', 'id -u; id -g; id -G', (c) => {
      c.linux = { security_context: { run_as_user: { value: 4321 }, run_as_group: { value: 5432 }, supplemental_groups: [6543, EXTRA_GID] } };
    }, env.images.app);
    const [uid, gid, groups] = configured.split('\n');
    assert.deepEqual([uid, gid], ['4321', '5432']);
    assert.deepEqual(groups!.split(' ').sort(), ['5432', '6543', String(EXTRA_GID)].sort(), 'no groups from /etc/group: uid 4321 has no name');
    const named = await env.output(pod, 'named-user', 'id -u; id -G', (c) => {
      c.linux = { security_context: { run_as_username: 'app' } };
    });
    assert.deepEqual(named.split('\n').map((l) => l.split(' ').sort().join(' ')), [String(APP_UID), [String(APP_GID), String(EXTRA_GID)].sort().join(' ')]);
  });

  it('makes a read-only bind mount unwritable and a writable one shared with the host', async (t) => {
    const pod = await env.runPod(t, 'mounts');
    const ro = await tempDir(t, 'ro');
    const rw = await tempDir(t, 'rw');
    await writeFile(join(ro, 'seen'), 'from the host\n');
    const out = await env.output(pod, 'binds', 'cat /ro/seen; touch /ro/new 2>/dev/null && echo ro-writable || echo ro-refused; echo made > /rw/made; echo ok', (c) => {
      c.mounts = [
        { container_path: '/ro', host_path: ro, readonly: true, propagation: 'PROPAGATION_PRIVATE' },
        { container_path: '/rw', host_path: rw, readonly: false, propagation: 'PROPAGATION_PRIVATE' },
      ];
    });
    assert.deepEqual(out.split('\n'), ['from the host', 'ro-refused', 'ok']);
    assert.equal(await execa('cat', [join(rw, 'made')]).then((r) => r.stdout), 'made');
  });

  it('propagates a mount made on the host after start into a HOST_TO_CONTAINER mount', async (t) => {
    const pod = await env.runPod(t, 'propagation');
    const src = await tempDir(t, 'prop');
    // The host's / is private here: make the source a shared mount of its own so it has a peer group.
    await execa('mount', ['--bind', src, src]);
    await execa('mount', ['--make-shared', src]);
    await mkdir(join(src, 'later'));
    const id = await env.run(pod, 'watcher', ['sleep', '1000'], (c) => {
      c.mounts = [{ container_path: '/data', host_path: src, readonly: false, propagation: 'PROPAGATION_HOST_TO_CONTAINER' }];
    });
    assert.equal((await env.exec(id, 'ls /data/later')).stdout, '');
    await execa('mount', ['-t', 'tmpfs', 'minicri-ctest-prop', join(src, 'later')]);
    await writeFile(join(src, 'later', 'hello'), 'propagated\n');
    const r = await env.exec(id, 'cat /data/later/hello; grep -c minicri-ctest-prop /proc/mounts');
    assert.equal(r.stdout, 'propagated\n1\n');
    // The container's mount namespace must let go of the propagated mount when the container is gone.
    await env.rt.runtime.call('RemoveContainer', { container_id: id });
  });

  it('drops ALL and adds NET_ADMIN: CapEff holds exactly NET_ADMIN', async (t) => {
    const pod = await env.runPod(t, 'caps');
    const dropped = await env.output(pod, 'net-admin', 'grep CapEff /proc/self/status', (c) => {
      c.linux = { security_context: { capabilities: { drop_capabilities: ['ALL'], add_capabilities: ['NET_ADMIN'] } } };
    });
    assert.equal(capEff(dropped), 1n << CAP_NET_ADMIN);
    const defaults = capEff(await env.output(pod, 'defaults', 'grep CapEff /proc/self/status'));
    assert.ok(defaults !== 0n && (defaults & (1n << CAP_NET_ADMIN)) === 0n, 'the default set has no NET_ADMIN');
  });

  it('shows host devices only to a privileged container in a privileged pod', async (t) => {
    const script = 'test -c /dev/loop-control && echo loop-control; test -b /dev/vda && echo vda; echo done';
    const plain = await env.runPod(t, 'unprivileged');
    assert.equal(await env.output(plain, 'plain', script), 'done');
    const pod = await env.runPod(t, 'privileged', (c) => { c.linux!.security_context!.privileged = true; });
    const seen = await env.output(pod, 'priv', script, (c) => { c.linux = { security_context: { privileged: true } }; });
    assert.match(seen, /^loop-control\n/);
    assert.match(seen, /done$/);
    assert.equal(capEff(await env.output(pod, 'priv-caps', 'grep CapEff /proc/self/status', (c) => {
      c.linux = { security_context: { privileged: true } };
    })) & (1n << 21n), 1n << 21n, 'a privileged container has CAP_SYS_ADMIN');
  });

  it('blocks unshare under the RuntimeDefault seccomp profile and allows it Unconfined', async (t) => {
    const pod = await env.runPod(t, 'seccomp');
    const script = 'unshare -U true 2>&1 && echo allowed || echo blocked';
    const confined = await env.output(pod, 'confined', script, (c) => {
      c.linux = { security_context: { seccomp: { profile_type: 'RuntimeDefault' } } };
    });
    assert.match(confined, /blocked$/);
    const unconfined = await env.output(pod, 'unconfined', script, (c) => {
      c.linux = { security_context: { seccomp: { profile_type: 'Unconfined' } } };
    });
    assert.equal(unconfined, 'allowed');
  });

  it('masks /proc as kubelet\'s lists say, and not at all for procMount Unmasked (empty lists)', async (t) => {
    const pod = await env.runPod(t, 'procmount');
    const script = 'echo keys=$(grep -c " /proc/keys " /proc/mounts); echo sys=$(awk \'$2 == "/proc/sys" { split($4, o, ","); print o[1] }\' /proc/mounts)';
    assert.equal(await env.output(pod, 'masked', script), 'keys=1\nsys=ro');
    assert.equal(await env.output(pod, 'unmasked', script, (c) => {
      c.linux = { security_context: { masked_paths: [], readonly_paths: [] } };
    }), 'keys=0\nsys=');
  });

  it('says in verbose Status whether AppArmor confines containers', async () => {
    const enabled = await readFile('/sys/module/apparmor/parameters/enabled', 'utf8').then((s) => s.trim() === 'Y', () => false);
    const r = await env.rt.runtime.call('Status', { verbose: true });
    const apparmor = JSON.parse(r.info.apparmor!);
    assert.deepEqual(apparmor, enabled
      ? { enabled: true, defaultProfile: 'minicri-default', loaded: true, mode: 'enforce', version: MINICRI_PROFILE_VERSION }
      : { enabled: false, defaultProfile: 'minicri-default', loaded: false, version: MINICRI_PROFILE_VERSION });
  });

  it('shares the pause in a POD PID namespace and keeps a CONTAINER one to itself', async (t) => {
    const own = await env.runPod(t, 'pid-container');
    // "; true" keeps sh from exec'ing ps, so the shell stays PID 1.
    const ownPs = await env.output(own, 'ps', 'ps -o pid,args; true');
    assert.doesNotMatch(ownPs, /pause/);
    assert.match(ownPs, /^\s*1 sh -c ps/m, 'the container\'s own process is PID 1');
    const shared = await env.runPod(t, 'pid-pod', (c) => { c.linux!.security_context!.namespace_options!.pid = 'POD'; });
    const sharedPs = await env.output(shared, 'ps', 'ps -o pid,args; true');
    assert.match(sharedPs, /^\s*1 \/pause/m, 'the pause is PID 1 of the pod');
    assert.match(sharedPs, /^\s*\d+ sh -c ps/m);
  });
});
