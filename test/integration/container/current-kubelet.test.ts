// What kubelets 1.30-1.36 send beyond the older CRI, through the real daemon: stop_signal and the resolved
// user in ContainerStatus, seccomp profiles given the legacy way, CDI devices and image volumes.
import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { ContainerConfig } from '../../../gen/runtime/v1/ContainerConfig.js';
import { APP_GID, APP_UID, busyboxImageLayer, EXTRA_GID } from '../../support/busybox-image.js';
import { cgroupHierarchies, removeCgroupDir } from '../../../oci/runtime/cgroups.js';
import { buildImage, pushImage } from '../../support/test-images.js';
import { ContainerEnv, sleep } from './env.js';

function grpcCode(code: grpc.status, details?: RegExp) {
  return (err: grpc.ServiceError) => {
    assert.equal(err.code, code, `expected ${grpc.status[code]}, got ${grpc.status[err.code]}: ${err.details}`);
    if (details) assert.match(err.details, details);
    return true;
  };
}

/** A temp dir removed when the test ends. */
async function tempDir(t: TestContext, prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `minicri-ctest-${prefix}-`));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** The pause's seccomp mode and filter count (/proc/<pid>/status: 0 none, 2 filtered). */
async function seccompOf(pid: number): Promise<{ mode: string; filters: string }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return { mode: /^Seccomp:\s*(\d+)/m.exec(status)![1]!, filters: /^Seccomp_filters:\s*(\d+)/m.exec(status)?.[1] ?? '?' };
}

/** A profile that allows everything but mkdir, which fails with EPERM. */
const NO_MKDIR = JSON.stringify({
  defaultAction: 'SCMP_ACT_ALLOW',
  syscalls: [{ names: ['mkdir', 'mkdirat'], action: 'SCMP_ACT_ERRNO', errnoRet: 1 }],
});

describe('the CRI of current kubelets', () => {
  let env: ContainerEnv;
  // The daemon's CDI spec directory: the tests write their spec files there.
  let cdiDir: string;
  before(async () => {
    cdiDir = await mkdtemp(join(tmpdir(), 'minicri-ctest-cdi-'));
    env = await ContainerEnv.start(74, `[cdi]\nspec_dirs = ["${cdiDir}"]\n`);
  });
  after(async () => {
    try {
      await env.stop();
    } finally {
      await rm(cdiDir, { recursive: true, force: true });
    }
  });

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

  it('names the image in ContainerStatus by its tag, or by the digest reference of a digest-only pull, as kubelet shows it', async (t) => {
    const pod = await env.runPod(t, 'imgname');
    // As kubelet creates containers: the id PullImage answered, the pod spec's image as user_specified_image.
    const root = (await env.rt.image.call('ImageStatus', { image: { image: env.images.root } })).image!;
    const tagged = await env.run(pod, 'tagged', ['sleep', '1000'], (c) => { c.image = { image: root.id, user_specified_image: env.images.root }; }, root.id);
    const byTag = await env.status(tagged);
    assert.equal(byTag.image?.image, env.images.root, 'the first repo tag, not the id');
    assert.equal(byTag.image_ref, root.repo_digests[0], 'image_ref stays the repo digest');
    assert.equal(byTag.image_id, root.id);

    const built = await buildImage([await busyboxImageLayer()], { Env: ['PATH=/bin'], Labels: { pulled: 'by digest only' } });
    await pushImage(env.registry, 'test/digest-only', ['unused'], built);
    const digestRef = `${env.registry.host}/test/digest-only@${built.manifestDigest}`;
    const { image_ref: id } = await env.rt.image.call('PullImage', { image: { image: digestRef } });
    t.after(() => env.rt.image.call('RemoveImage', { image: { image: id } }));
    const pinned = await env.run(pod, 'pinned', ['sleep', '1000'], (c) => { c.image = { image: id, user_specified_image: digestRef }; }, id);
    const byDigest = await env.status(pinned);
    assert.equal(byDigest.image?.image, digestRef, 'the digest reference the pod named');
    assert.equal(byDigest.image_ref, digestRef);
    assert.equal(byDigest.image_id, id);
    // What kubelet lists (ListContainers) keeps the id it created the container with.
    const listed = (await env.rt.runtime.call('ListContainers', { filter: { id: pinned } })).containers[0]!;
    assert.equal(listed.image?.image, id);
  });

  it('refuses a stop_signal that is no CRI signal and leaves nothing behind', async (t) => {
    const pod = await env.runPod(t, 'badsig');
    const before = (await env.rt.runtime.call('ListContainers', {})).containers.length;
    await assert.rejects(env.create(pod, 'bad', ['true'], (c) => { (c as { stop_signal: unknown }).stop_signal = 99; }),
      grpcCode(grpc.status.INVALID_ARGUMENT, /stop_signal 99/));
    assert.equal((await env.rt.runtime.call('ListContainers', {})).containers.length, before);
  });

  it('reads a Localhost seccomp profile given the legacy way, in the sandbox and in a container', async (t) => {
    const dir = await tempDir(t, 'seccomp');
    const profile = join(dir, 'no-mkdir.json');
    await writeFile(profile, NO_MKDIR);
    const pod = await env.runPod(t, 'legacy-seccomp', (c) => { c.linux!.security_context!.seccomp_profile_path = `localhost/${profile}`; });
    const info = JSON.parse((await env.rt.runtime.call('PodSandboxStatus', { pod_sandbox_id: pod.id, verbose: true })).info.info!) as { pid: number };
    assert.equal((await seccompOf(info.pid)).mode, '2', 'the pause runs under a seccomp filter');
    const pauseSpec = JSON.parse(await readFile(join(env.dirs.rootDir, 'sandboxes', pod.id, 'config.json'), 'utf8')) as
      { linux: { seccomp?: { syscalls: { names: string[]; action: string }[] } } };
    assert.deepEqual(pauseSpec.linux.seccomp?.syscalls.map((s) => [s.names, s.action]), [[['mkdir', 'mkdirat'], 'SCMP_ACT_ERRNO']]);
    // A pod without one has no filter on its pause: the mode above came from the profile.
    const plain = await env.runPod(t, 'plain-seccomp');
    const plainInfo = JSON.parse((await env.rt.runtime.call('PodSandboxStatus', { pod_sandbox_id: plain.id, verbose: true })).info.info!) as { pid: number };
    assert.equal((await seccompOf(plainInfo.pid)).mode, '0');

    const script = 'mkdir /tmp/made 2>&1 && echo allowed || echo blocked';
    const confined = await env.output(pod, 'legacy', script, (c) => {
      c.linux = { security_context: { seccomp_profile_path: `localhost/${profile}` } };
    });
    assert.match(confined, /blocked$/);
    const viaField = await env.output(pod, 'field', script, (c) => {
      c.linux = { security_context: { seccomp: { profile_type: 'Localhost', localhost_ref: profile } } };
    });
    assert.match(viaField, /blocked$/);
    assert.equal(await env.output(pod, 'free', script), 'allowed');
  });

  it('refuses a legacy Localhost profile that is missing or relative, leaving nothing behind', async (t) => {
    const dir = await tempDir(t, 'seccomp-missing');
    const sandboxes = (await env.rt.runtime.call('ListPodSandbox', {})).items.length;
    await assert.rejects(env.runPod(t, 'missing-seccomp', (c) => { c.linux!.security_context!.seccomp_profile_path = `localhost/${dir}/none.json`; }),
      grpcCode(grpc.status.INVALID_ARGUMENT, /none\.json cannot be read: it was not found on this node/));
    await assert.rejects(env.runPod(t, 'relative-seccomp', (c) => { c.linux!.security_context!.seccomp_profile_path = 'localhost/profiles/x.json'; }),
      grpcCode(grpc.status.INVALID_ARGUMENT, /"profiles\/x\.json" is not an absolute path/));
    assert.equal((await env.rt.runtime.call('ListPodSandbox', {})).items.length, sandboxes);
    const pod = await env.runPod(t, 'seccomp-refused');
    await assert.rejects(env.create(pod, 'missing', ['true'], (c) => {
      c.linux = { security_context: { seccomp_profile_path: `localhost/${dir}/none.json` } };
    }), grpcCode(grpc.status.INVALID_ARGUMENT, /not found on this node/));
    assert.deepEqual((await env.rt.runtime.call('ListContainers', { filter: { pod_sandbox_id: pod.id } })).containers, []);
  });

  it('gives a container the device node, environment, mount and groups of its CDI devices', async (t) => {
    const data = await tempDir(t, 'cdi-data');
    await writeFile(join(data, 'file'), 'from the vendor\n');
    await writeFile(join(cdiDir, 'test.yaml'), [
      'cdiVersion: "0.7.0"',
      'kind: minicri.test/dev',
      'containerEdits:',
      '  env: [CDI_VENDOR=minicri]',
      'devices:',
      '  - name: null0',
      '    containerEdits:',
      '      env: [CDI_DEVICE=null0]',
      '      deviceNodes: [{path: /dev/cdi-null, hostPath: /dev/null}]',
      `      mounts: [{hostPath: ${data}, containerPath: /cdi-data, options: [ro, rbind]}]`,
      '      additionalGids: [4711]',
      '  - name: zero',
      '    containerEdits:',
      '      deviceNodes: [{path: /dev/cdi-zero, hostPath: /dev/zero, permissions: r}]',
      '',
    ].join('\n'));
    const status = await env.rt.runtime.call('Status', { verbose: true });
    assert.deepEqual((JSON.parse(status.info.cdi!) as { devices: string[] }).devices, ['minicri.test/dev=null0', 'minicri.test/dev=zero']);
    const pod = await env.runPod(t, 'cdi');
    const script = 'test -c /dev/cdi-null && echo node; echo "$CDI_VENDOR $CDI_DEVICE"; cat /cdi-data/file; ' +
      'echo x > /dev/cdi-null && echo writable; id -G | tr " " "\\n" | grep -x 4711; head -c 3 /dev/cdi-zero | od -An -tx1; ' +
      'touch /cdi-data/new 2>/dev/null && echo data-writable || echo data-ro';
    const out = await env.output(pod, 'cdi', script, (c) => {
      c.CDI_devices = [{ name: 'minicri.test/dev=null0' }];
      c.annotations = { 'cdi.k8s.io/test': 'minicri.test/dev=zero' };
    });
    assert.deepEqual(out.split('\n').map((l) => l.trim()), ['node', 'minicri null0', 'from the vendor', 'writable', '4711', '00 00 00', 'data-ro']);
  });

  it('runs the poststart hooks of a CDI device, with the container\'s state on their stdin', async (t) => {
    const dir = await tempDir(t, 'cdi-hook');
    await writeFile(join(cdiDir, 'hook.yaml'), [
      'cdiVersion: "0.7.0"',
      'kind: minicri.test/hook',
      'devices:',
      '  - name: started',
      '    containerEdits:',
      `      hooks: [{hookName: poststart, path: /bin/sh, args: [sh, -c, "cat > ${dir}/state.json"]}]`,
      '',
    ].join('\n'));
    const pod = await env.runPod(t, 'cdi-hook');
    const out = await env.output(pod, 'cdi-hook', 'echo ran', (c) => { c.CDI_devices = [{ name: 'minicri.test/hook=started' }]; });
    assert.equal(out.trim(), 'ran');
    const state = JSON.parse(await readFile(join(dir, 'state.json'), 'utf8')) as { id: string; status: string };
    const [container] = (await env.rt.runtime.call('ListContainers', { filter: { pod_sandbox_id: pod.id } })).containers;
    assert.equal(state.id, container?.id);
  });

  it('refuses unknown, relative and conflicting CDI devices and broken spec files by name, leaving nothing behind', async (t) => {
    await writeFile(join(cdiDir, 'clash-a.json'), JSON.stringify({ cdiVersion: '0.5.0', kind: 'minicri.test/clash', devices: [{ name: 'a', containerEdits: { env: ['WHO=a'] } }] }));
    await writeFile(join(cdiDir, 'clash-b.json'), JSON.stringify({ cdiVersion: '0.5.0', kind: 'minicri.test/other', devices: [{ name: 'b', containerEdits: { env: ['WHO=b'] } }] }));
    await writeFile(join(cdiDir, 'broken.yaml'), 'cdiVersion: "0.5.0"\nkind: minicri.test/broken\ndevices: [{name: x, containerEdits: {env: [NOEQUALS]}}]\n');
    t.after(() => Promise.all(['clash-a.json', 'clash-b.json', 'broken.yaml'].map((f) => rm(join(cdiDir, f), { force: true }))));
    const pod = await env.runPod(t, 'cdi-bad');
    const refused = async (names: string[], details: RegExp, annotations: Record<string, string> = {}) => {
      await assert.rejects(env.create(pod, 'bad', ['true'], (c) => { c.CDI_devices = names.map((name) => ({ name })); c.annotations = annotations; }),
        grpcCode(grpc.status.INVALID_ARGUMENT, details));
    };
    await refused(['minicri.test/dev=nope'], /CDI device "minicri.test\/dev=nope" is unknown/);
    await refused(['null0'], /CDI device "null0" is not a fully qualified name/);
    await refused([], /"gpu" is not a fully qualified name/, { 'cdi.k8s.io/x': 'gpu' });
    await refused(['minicri.test/clash=a', 'minicri.test/other=b'], /CDI device "minicri.test\/clash=a" and CDI device "minicri.test\/other=b" conflict: they set environment variable WHO/);
    await refused(['minicri.test/broken=x'], /broken\.yaml/);
    const status = JSON.parse((await env.rt.runtime.call('Status', { verbose: true })).info.cdi!) as { errors: Record<string, string> };
    assert.match(status.errors[join(cdiDir, 'broken.yaml')]!, /must be NAME=value/);
    assert.deepEqual((await env.rt.runtime.call('ListContainers', { filter: { pod_sandbox_id: pod.id } })).containers, []);
    assert.deepEqual((await readdir(join(env.dirs.rootDir, 'containers')).catch(() => [])), [], 'no container directory is left');
  });

  it('mounts an image as a read-only volume whose binaries run, shared by its users, which survives a daemon restart', async (t) => {
    const pod = await env.runPod(t, 'imgvol');
    const volume = (c: ContainerConfig, sub = '') => {
      c.mounts = [{ container_path: '/vol', image: { image: env.images.usr1 }, image_sub_path: sub, readonly: true }];
    };
    const views = async () => (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').filter((l) => l.includes(env.dirs.base) && l.includes('/imgvol-'));
    const first = await env.run(pod, 'first', ['sleep', '1000'], (c) => volume(c));
    const second = await env.run(pod, 'second', ['sleep', '1000'], (c) => volume(c, 'etc/../etc'));
    assert.equal((await views()).length, 1, 'one view of the image, shared');
    // cri-api v0.36: not noexec, a binary the image ships runs from the volume.
    const r = await env.exec(first, 'cat /vol/etc/passwd >/dev/null && echo readable; touch /vol/new 2>&1 || echo refused; /vol/bin/busybox echo ran from the volume');
    assert.match(r.stdout, /^readable\n.*Read-only file system\nrefused\nran from the volume\n$/s);
    assert.match((await env.exec(second, 'ls /vol')).stdout, /passwd/, 'the sub path is what is mounted');
    await assert.rejects(env.rt.image.call('RemoveImage', { image: { image: env.images.usr1 } }),
      grpcCode(grpc.status.FAILED_PRECONDITION, new RegExp(`is used by container "first" \\(${first}\\) of pod minicri-test/imgvol: remove the container first`)));

    await env.restartDaemon();
    assert.equal((await env.exec(first, 'cat /vol/etc/passwd >/dev/null && echo still')).stdout, 'still\n');
    assert.equal((await views()).length, 1, 'the restart kept the view');
    await env.rt.runtime.call('RemoveContainer', { container_id: first });
    await env.rt.removalsSettled();
    assert.equal((await views()).length, 1, 'the other user keeps the view');
    assert.match((await env.exec(second, 'ls /vol')).stdout, /passwd/);
    await env.rt.runtime.call('RemoveContainer', { container_id: second });
    await env.rt.removalsSettled();
    assert.deepEqual(await views(), [], 'the last user takes the view with it');
  });

  it('refuses an image volume that leaves its image or names an image not pulled, leaving nothing behind', async (t) => {
    const pod = await env.runPod(t, 'imgvol-bad');
    const attempt = (image: string, sub: string) => env.create(pod, 'bad', ['true'], (c) => {
      c.mounts = [{ container_path: '/vol', image: { image }, image_sub_path: sub, readonly: true }];
    });
    await assert.rejects(attempt(env.images.root, '../..'), grpcCode(grpc.status.INVALID_ARGUMENT, /image_sub_path "\.\.\/\.\." .* leaves the image/));
    await assert.rejects(attempt(env.images.root, '/etc'), grpcCode(grpc.status.INVALID_ARGUMENT, /must be a relative path/));
    await assert.rejects(attempt(env.images.root, 'etc/passwd'), grpcCode(grpc.status.INVALID_ARGUMENT, /not a directory in image volume/));
    await assert.rejects(attempt('localhost:1/never/pulled:1', ''), grpcCode(grpc.status.NOT_FOUND, /never\/pulled/));
    assert.deepEqual((await env.rt.runtime.call('ListContainers', { filter: { pod_sandbox_id: pod.id } })).containers, []);
    const leftovers = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').filter((l) => l.includes(env.dirs.base) && l.includes('/imgvol-'));
    assert.deepEqual(leftovers, [], 'no image volume view is left');
    assert.deepEqual((await readdir(join(env.dirs.rootDir, 'images', 'rootfs'))).filter((k) => k.startsWith('imgvol-')), []);
  });

  it('refuses a single-manifest image built for another architecture, naming both', async () => {
    const other = process.arch === 'arm64' ? { os: 'linux', architecture: 'amd64' } : { os: 'linux', architecture: 'arm64' };
    const image = await buildImage([{ entries: [{ name: 'arch', data: other.architecture }] }], {}, other);
    await pushImage(env.registry, 'test/foreign', ['v1'], image);
    await assert.rejects(env.rt.image.call('PullImage', { image: { image: `${env.registry.host}/test/foreign:v1` } }),
      grpcCode(grpc.status.INVALID_ARGUMENT, new RegExp(`is for linux/${other.architecture}, but this node is linux/`)));
    assert.equal((await env.rt.image.call('ImageStatus', { image: { image: `${env.registry.host}/test/foreign:v1` } })).image, null);
  });

  it('applies UpdatePodSandboxResources to the pod cgroup, best effort, and refuses an unknown sandbox', async (t) => {
    // A pod cgroup of its own, as kubelet gives each pod (the tests' shared parent must not be resized).
    const podCgroup = `/minicri-test/upd-${process.pid}`;
    const hierarchies = await cgroupHierarchies();
    const pod = await env.runPod(t, 'resize', (c) => { c.linux!.cgroup_parent = podCgroup; });
    // The pod first, then its cgroup (kubelet's to remove, here the test's).
    t.after(async () => {
      await env.rt.runtime.call('RemovePodSandbox', { pod_sandbox_id: pod.id });
      await removeCgroupDir(podCgroup, hierarchies);
    });
    const MiB = 1024 * 1024;
    await env.rt.runtime.call('UpdatePodSandboxResources', {
      pod_sandbox_id: pod.id,
      resources: { memory_limit_in_bytes: 200 * MiB, cpu_quota: 50_000, cpu_period: 100_000, cpu_shares: 512 },
      overhead: { memory_limit_in_bytes: 8 * MiB, cpu_shares: 2 },
    });
    const unified = !hierarchies.some((h) => h.endsWith('/memory'));
    const read = (controller: string, file: string) => readFile(join('/sys/fs/cgroup', unified ? '' : controller, podCgroup, file), 'utf8').then((v) => v.trim());
    if (unified) {
      assert.equal(await read('', 'memory.max'), String(208 * MiB));
      assert.equal(await read('', 'cpu.max'), '50000 100000');
    } else {
      assert.equal(await read('memory', 'memory.limit_in_bytes'), String(208 * MiB));
      assert.equal(await read('cpu', 'cpu.cfs_quota_us'), '50000');
      assert.equal(await read('cpu', 'cpu.shares'), '514');
    }
    const info = JSON.parse((await env.rt.runtime.call('PodSandboxStatus', { pod_sandbox_id: pod.id, verbose: true })).info.info!) as
      { config: { linux: { resources: { memory_limit_in_bytes: string } } } };
    assert.equal(info.config.linux.resources.memory_limit_in_bytes, String(200 * MiB), 'the sandbox keeps what it was told');
    await assert.rejects(env.rt.runtime.call('UpdatePodSandboxResources', { pod_sandbox_id: 'f'.repeat(64), resources: {} }), grpcCode(grpc.status.NOT_FOUND));
    await assert.rejects(env.rt.runtime.call('UpdatePodSandboxResources', { pod_sandbox_id: pod.id, resources: { cpu_shares: 1 } }), grpcCode(grpc.status.INVALID_ARGUMENT, /cpu_shares/));
  });

  it('takes environment values as bytes: UTF-8 intact, a value that is no UTF-8 accepted', async (t) => {
    const pod = await env.runPod(t, 'envbytes');
    const out = await env.output(pod, 'env', 'echo "$TEXT"; printf %s "$BINARY" | od -An -tx1', (c) => {
      c.envs = [{ key: 'TEXT', value: Buffer.from('grüße, 世界') }, { key: 'BINARY', value: Buffer.from([0x61, 0xff, 0x62]) }];
    });
    // The OCI spec is JSON, so runc reads a byte that is no UTF-8 as U+FFFD (ef bf bd), as under other runtimes.
    assert.deepEqual(out.split('\n').map((l) => l.trim()), ['grüße, 世界', '61 ef bf bd 62']);
  });
});
