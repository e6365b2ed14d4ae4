import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgument, Unimplemented } from '../../../core/errors.js';
import { idMapText } from '../../../mounter/mounter.js';
import { buildContainerSpec } from '../../../oci/runtime/spec/container.js';
import { buildPauseSpec } from '../../../oci/runtime/spec/pause.js';
import { checkUsernsMounts, podRootOnHost, podUserNamespace, stageUsernsMounts } from '../../../oci/runtime/spec/userns.js';
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

  it('refuses malformed, overlapping and split mappings, naming the mapping', () => {
    refused(podWith('POD', [range(1000)]), InvalidArgument, /uid mapping 0:1000:65536 .*overlaps the host's own ids/);
    refused(podWith('POD', [range(BASE)], [range(0)]), InvalidArgument, /gid mapping .*overlaps the host's own ids/);
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
    checkUsernsMounts([mount({ container_path: '/p', host_path: '/h' })]);
    assert.throws(() => checkUsernsMounts([mount({ container_path: '/p', host_path: '/h', propagation: 'PROPAGATION_BIDIRECTIONAL' })]),
      (err) => err instanceof InvalidArgument && /"\/p" asks for propagation PROPAGATION_BIDIRECTIONAL/.test(err.message));
  });
});
