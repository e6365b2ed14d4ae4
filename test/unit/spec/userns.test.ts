import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgument, Unimplemented } from '../../../core/errors.js';
import { idMapText } from '../../../mounter/mounter.js';
import { buildContainerSpec } from '../../../oci/runtime/spec/container.js';
import { buildPauseSpec } from '../../../oci/runtime/spec/pause.js';
import { parseMountInfo } from '../../../oci/runtime/spec/mountinfo.js';
import { checkUsernsMounts, hostIdOverlap, idmapKernelProblem, podRootOnHost, podUserNamespace, stageUsernsMounts } from '../../../oci/runtime/spec/userns.js';
import { containerInput, mount, containerConfig, pauseInput, sandboxConfig } from './fixtures.js';

const BASE = 65536 * 5;
type Mapping = { host_id: number; container_id: number; length: number };
const range = (host_id: number, length = 65536, container_id = 0): Mapping => ({ host_id, container_id, length });

function podWith(mode: 'POD' | 'NODE' | 'TARGET' | 'CONTAINER', uids: Mapping[] = [range(BASE)], gids: Mapping[] = [range(BASE)], modes: Partial<Record<'network' | 'pid' | 'ipc', 'POD' | 'NODE'>> = {}) {
  return sandboxConfig({}, { namespace_options: { network: 'POD', pid: 'POD', ipc: 'POD', target_id: '', ...modes, userns_options: { mode, uids, gids } } });
}

function refused(config: ReturnType<typeof podWith>, type: typeof InvalidArgument | typeof Unimplemented, pattern: RegExp): void {
  assert.throws(() => podUserNamespace(config), (err) => err instanceof type && pattern.test(err.message));
}

describe('user namespace mappings', () => {
  it('takes the single range kubelet allocates, and nothing for NODE or an older kubelet', () => {
    assert.deepEqual(podUserNamespace(podWith('POD')), {
      uids: [{ containerId: 0, hostId: BASE, size: 65536 }], gids: [{ containerId: 0, hostId: BASE, size: 65536 }],
    });
    assert.equal(podUserNamespace(podWith('NODE', [], [])), undefined);
    assert.equal(podUserNamespace(sandboxConfig()), undefined);
    assert.deepEqual(podRootOnHost(podUserNamespace(podWith('POD', [range(BASE)], [range(BASE + 65536)]))!), { uid: BASE, gid: BASE + 65536 });
  });

  it('takes a mapping onto the host\'s own ids (critest\'s 0:1000:100000), and says what overlaps', () => {
    const critest = podUserNamespace(podWith('POD', [range(1000, 100000)], [range(1000, 100000)]))!;
    assert.deepEqual(critest.uids, [{ containerId: 0, hostId: 1000, size: 100000 }]);
    assert.equal(hostIdOverlap(critest), 'user namespace uid mapping 0:1000:100000 and gid mapping 0:1000:100000 (container:host:length) overlaps the host\'s own ids (0-65535)');
    assert.equal(hostIdOverlap(podUserNamespace(podWith('POD', [range(BASE)], [range(0)]))!), 'user namespace gid mapping 0:0:65536 (container:host:length) overlaps the host\'s own ids (0-65535)');
    assert.equal(hostIdOverlap(podUserNamespace(podWith('POD'))!), undefined);
    assert.equal(hostIdOverlap(podUserNamespace(podWith('POD', [range(65536)], [range(65536)]))!), undefined, 'kubelet\'s first range starts at 65536');
  });

  it('refuses malformed and split mappings, naming the mapping', () => {
    refused(podWith('POD', [range(BASE, 1000), range(BASE + 5000, 1000, 1000)]), InvalidArgument, /one contiguous range.*got 2/);
    refused(podWith('POD', []), InvalidArgument, /uid mappings must be one contiguous range.*got 0/);
    refused(podWith('POD', [range(BASE, 0)]), InvalidArgument, /length must be at least 1/);
    refused(podWith('POD', [range(BASE, 65536, 1)]), InvalidArgument, /must start at container id 0/);
    refused(podWith('POD', [range(2 ** 32 - 10, 65536)]), InvalidArgument, /runs past the last 32-bit id/);
    refused(podWith('POD', [range(-1)]), InvalidArgument, /host_id is not a 32-bit id/);
    refused(podWith('POD', [range(1.5)]), InvalidArgument, /host_id is not a 32-bit id/);
  });

  it('leaves TARGET and CONTAINER unimplemented, and refuses host namespaces beside a user namespace', () => {
    refused(podWith('TARGET'), Unimplemented, /mode TARGET is not supported/);
    refused(podWith('CONTAINER'), Unimplemented, /mode CONTAINER is not supported/);
    refused(podWith('POD', undefined, undefined, { network: 'NODE' }), InvalidArgument, /host's network namespace/);
    refused(podWith('POD', undefined, undefined, { pid: 'NODE' }), InvalidArgument, /host's PID namespace/);
    refused(podWith('POD', undefined, undefined, { ipc: 'NODE' }), InvalidArgument, /host's IPC namespace/);
  });

  it('writes mappings as /proc/<pid>/uid_map takes them', () => {
    assert.equal(idMapText([{ containerId: 0, hostId: BASE, size: 65536 }]), `0 ${BASE} 65536\n`);
  });
});

describe('user namespace spec edits', () => {
  const expected = [{ containerID: 0, hostID: BASE, size: 65536 }];

  it('gives the pause a new user namespace with the mappings, and a network namespace runc makes in it', () => {
    const s = buildPauseSpec(pauseInput({ config: podWith('POD') }));
    assert.deepEqual(s.linux?.namespaces, [{ type: 'mount' }, { type: 'network' }, { type: 'uts' }, { type: 'ipc' }, { type: 'pid' }, { type: 'user' }]);
    assert.deepEqual(s.linux?.uidMappings, expected);
    assert.deepEqual(s.linux?.gidMappings, expected);
    const plain = buildPauseSpec(pauseInput());
    assert.equal(plain.linux?.uidMappings, undefined);
    assert.ok(!plain.linux?.namespaces?.some((n) => n.type === 'user'));
  });

  it('puts a container in the pause\'s user namespace with the same mappings', () => {
    const s = buildContainerSpec(containerInput({ sandboxConfig: podWith('POD') }));
    assert.deepEqual(s.linux?.namespaces?.find((n) => n.type === 'user'), { type: 'user', path: '/proc/4242/ns/user' });
    assert.deepEqual(s.linux?.uidMappings, expected);
    assert.deepEqual(s.linux?.gidMappings, expected);
    // The pod's network namespace, pinned from the pause's, as for any pod.
    assert.deepEqual(s.linux?.namespaces?.find((n) => n.type === 'network'), { type: 'network', path: '/var/run/netns/minicri-5a4db0c' });
  });

  it('stages the root and every bind source in the entry, and only those', () => {
    const s = buildContainerSpec(containerInput({
      sandboxConfig: podWith('POD'),
      config: containerConfig({ mounts: [mount({ container_path: '/data', host_path: '/srv/data', readonly: true })] }),
    }));
    const binds = (s.mounts ?? []).filter((m) => m.type === 'bind').map((m) => m.source);
    const staged = stageUsernsMounts(s, '/run/minicri-userns/c0ffee', true);
    assert.deepEqual(staged[0], { source: '/var/lib/minicri/containers/c0ffee/rootfs', target: '/run/minicri-userns/c0ffee/rootfs', kind: 'bind' });
    assert.deepEqual(staged.slice(1).map((m) => m.source), binds);
    assert.ok(staged.slice(1).every((m, i) => m.kind === 'idmap' && m.target === `/run/minicri-userns/c0ffee/m${i}`));
    assert.equal(s.root?.path, '/run/minicri-userns/c0ffee/rootfs');
    assert.deepEqual((s.mounts ?? []).filter((m) => m.type === 'bind').map((m) => m.source), staged.slice(1).map((m) => m.target));
    assert.ok((s.mounts ?? []).some((m) => m.destination === '/data' && m.source?.startsWith('/run/minicri-userns/c0ffee/m')));
    assert.equal(staged.find((m) => m.source === '/srv/data')?.destination, '/data', 'a staged mount names where the container sees it');
    // proc, sysfs and the like are no bind mounts: runc mounts them itself.
    assert.ok((s.mounts ?? []).some((m) => m.type === 'proc' && m.source === 'proc'));
    // An image volume (a shared overlay, which cannot be id-mapped) is bound as it is.
    const again = buildContainerSpec(containerInput({
      sandboxConfig: podWith('POD'),
      config: containerConfig({ mounts: [mount({ container_path: '/data', host_path: '/srv/data', readonly: true })] }),
    }));
    assert.equal(stageUsernsMounts(again, '/e', true, new Set(['/srv/data'])).find((m) => m.source === '/srv/data')?.kind, 'bind');
    // A plain directory as the root (the pause's shared layer) is id-mapped itself.
    assert.equal(stageUsernsMounts(buildPauseSpec(pauseInput({ config: podWith('POD') })), '/e', false)[0]!.kind, 'idmap');
  });

  it('refuses a bind mount with propagation in a user-namespaced pod', () => {
    const s = buildContainerSpec(containerInput({ sandboxConfig: podWith('POD') }));
    s.mounts!.push({ destination: '/shared', type: 'bind', source: '/mnt', options: ['rbind', 'rslave', 'rw'] });
    assert.throws(() => stageUsernsMounts(s, '/e', true), (err) => err instanceof InvalidArgument && /"\/shared".*propagation/.test(err.message));
    // The same, from the request, before anything is made.
    const userns = podUserNamespace(podWith('POD'));
    checkUsernsMounts([mount({ container_path: '/p', host_path: '/h' })], userns);
    assert.throws(() => checkUsernsMounts([mount({ container_path: '/p', host_path: '/h', propagation: 'PROPAGATION_BIDIRECTIONAL' })], userns),
      (err) => err instanceof InvalidArgument && /"\/p" asks for propagation PROPAGATION_BIDIRECTIONAL/.test(err.message));
    // A pod in the host's user namespace keeps its propagation.
    checkUsernsMounts([mount({ container_path: '/p', host_path: '/h', propagation: 'PROPAGATION_BIDIRECTIONAL' })], undefined);
  });
});

describe('id mappings on mounts', () => {
  const userns = podUserNamespace(podWith('POD'));
  const pods = [range(BASE)];
  const bad = (m: Parameters<typeof mount>[0], pattern: RegExp) =>
    assert.throws(() => checkUsernsMounts([mount(m)], userns), (err) => err instanceof InvalidArgument && pattern.test(err.message), pattern.source);

  it('takes the pod\'s own mappings on any mount, as kubelet sends them, image volumes included', () => {
    checkUsernsMounts([
      mount({ container_path: '/data', host_path: '/srv/data', uidMappings: pods, gidMappings: pods }),
      mount({ container_path: '/iv', host_path: '', image: { image: 'busybox', annotations: {}, user_specified_image: '', runtime_handler: '', image_ref: '' }, uidMappings: pods, gidMappings: pods }),
      mount({ container_path: '/plain', host_path: '/srv/plain' }),
    ], userns);
    // critest's mapping below 65536, on a mount of such a pod.
    const low = podUserNamespace(podWith('POD', [range(1000, 100000)], [range(1000, 100000)]));
    checkUsernsMounts([mount({ container_path: '/d', host_path: '/h', uidMappings: [range(1000, 100000)], gidMappings: [range(1000, 100000)] })], low);
  });

  it('refuses mappings that are not the pod\'s, half of them, or any in a pod without its own user namespace', () => {
    bad({ container_path: '/d', host_path: '/h', uidMappings: [range(BASE + 65536)], gidMappings: pods },
      new RegExp(`mount "/d" asks for uid mapping 0:${BASE + 65536}:65536, not its pod's 0:${BASE}:65536 \\(container:host:length\\)`));
    bad({ container_path: '/d', host_path: '/h', uidMappings: pods, gidMappings: [range(BASE, 1000)] }, /gid mapping 0:\d+:1000, not its pod's/);
    bad({ container_path: '/d', host_path: '/h', uidMappings: [range(BASE, 1000), range(BASE + 2000, 1000, 1000)], gidMappings: pods }, /uid mapping 0:\d+:1000,1000:\d+:1000, not its pod's/);
    bad({ container_path: '/d', host_path: '/h', uidMappings: pods }, /"\/d" has uid mappings but no gid mappings/);
    bad({ container_path: '/d', host_path: '/h', gidMappings: pods }, /"\/d" has gid mappings but no uid mappings/);
    assert.throws(() => checkUsernsMounts([mount({ container_path: '/d', host_path: '/h', uidMappings: pods, gidMappings: pods })], undefined),
      (err) => err instanceof InvalidArgument && /"\/d" asks for an id-mapped mount, which only a pod in its own user namespace \(hostUsers: false\)/.test(err.message));
  });
});

describe('what the kernel cannot id-map', () => {
  const mountinfo = parseMountInfo([
    '22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw',
    '30 22 0:25 / /run rw,nosuid shared:5 - tmpfs tmpfs rw',
    '41 22 0:40 / /var/lib/kubelet/pods/p1/volumes/kubernetes.io~projected/token rw shared:9 - tmpfs tmpfs rw',
    '42 22 0:41 / /srv/tree/secret rw shared:10 - tmpfs tmpfs rw',
  ].join('\n'));
  const token = { source: '/var/lib/kubelet/pods/p1/volumes/kubernetes.io~projected/token', destination: '/var/run/secrets/kubernetes.io/serviceaccount' };

  it('names Linux 6.3 for a tmpfs source, or one with a tmpfs below it, on an older kernel', () => {
    assert.equal(idmapKernelProblem(token, mountinfo, '6.1.0-27-amd64'),
      'mount "/var/run/secrets/kubernetes.io/serviceaccount" (host path "/var/lib/kubelet/pods/p1/volumes/kubernetes.io~projected/token"): '
      + 'id-mapped mounts of tmpfs need Linux 6.3 or newer (this node runs 6.1.0-27-amd64) and the source is on tmpfs; '
      + 'a pod in its own user namespace (hostUsers: false) gets each volume id-mapped: run it with hostUsers: true, or the node on Linux 6.3 or newer');
    assert.match(idmapKernelProblem({ source: '/run/minicri/x' }, mountinfo, '5.15.0')!, /^mount "\/run\/minicri\/x": .*this node runs 5\.15\.0\) and the source is on tmpfs/);
    assert.match(idmapKernelProblem({ source: '/srv/tree', destination: '/tree' }, mountinfo, '6.2.16')!, /and a tmpfs is mounted below the source at "\/srv\/tree\/secret"/);
  });

  it('has nothing to say from Linux 6.3 on, or for a source with no tmpfs in it', () => {
    assert.equal(idmapKernelProblem(token, mountinfo, '6.3.0'), undefined);
    assert.equal(idmapKernelProblem(token, mountinfo, '6.18.44-fc-v669'), undefined);
    assert.equal(idmapKernelProblem({ source: '/srv/data', destination: '/data' }, mountinfo, '6.1.0'), undefined);
    // A sibling whose name only starts like the source is not below it.
    assert.equal(idmapKernelProblem({ source: '/srv/tre' }, mountinfo, '6.1.0'), undefined);
  });
});
