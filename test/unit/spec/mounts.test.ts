import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Internal, InvalidArgument } from '../../../core/errors.js';
import { parseMountInfo } from '../../../oci/runtime/spec/mountinfo.js';
import {
  cleanPath, defaultMountRoots, defaultMounts, imageVolumeMounts, imageVolumesToCreate, podFileMounts, withBindMounts,
  withDefaultMounts, withPodShm, withReadonlyRootfs, withWritableSysfs,
} from '../../../oci/runtime/spec/mounts.js';
import { applyOpts, baseSpec } from '../../../oci/runtime/spec/opts.js';
import { mount, MOUNTINFO } from './fixtures.js';

const ctx = { mountinfo: parseMountInfo(MOUNTINFO), recursiveReadOnly: true };
const dest = (s: { mounts?: Array<{ destination: string }> }): string[] => (s.mounts ?? []).map((m) => m.destination);

describe('default mounts', () => {
  it('has the kernel filesystems with read-only sysfs and cgroupfs', () => {
    const m = defaultMounts();
    assert.deepEqual(m.map((x) => x.destination), ['/proc', '/dev', '/dev/pts', '/dev/mqueue', '/dev/shm', '/sys', '/sys/fs/cgroup']);
    assert.ok(m.find((x) => x.destination === '/sys')?.options?.includes('ro'));
    assert.ok(m.find((x) => x.destination === '/sys/fs/cgroup')?.options?.includes('ro'));
    assert.equal(m.find((x) => x.destination === '/dev/shm')?.type, 'tmpfs');
    // A root filesystem with these needs no directory made in it.
    assert.deepEqual(defaultMountRoots(), ['/proc', '/dev', '/sys']);
  });
  it('privileged makes sysfs and cgroupfs writable', () => {
    const s = applyOpts(baseSpec('/r'), [withDefaultMounts(), withWritableSysfs()]);
    assert.ok(!s.mounts?.find((x) => x.destination === '/sys')?.options?.includes('ro'));
    assert.ok(!s.mounts?.find((x) => x.destination === '/sys/fs/cgroup')?.options?.includes('ro'));
  });
  it('withPodShm binds the pod shm read-only in place of the tmpfs', () => {
    const s = applyOpts(baseSpec('/r'), [withDefaultMounts(), withPodShm('/run/pod/shm')]);
    const shm = s.mounts?.filter((x) => x.destination === '/dev/shm');
    assert.deepEqual(shm, [{ destination: '/dev/shm', type: 'bind', source: '/run/pod/shm', options: ['rbind', 'ro', 'nosuid', 'nodev', 'noexec'] }]);
    const none = applyOpts(baseSpec('/r'), [withDefaultMounts(), withPodShm(undefined)]);
    assert.equal(none.mounts?.find((x) => x.destination === '/dev/shm')?.type, 'tmpfs');
  });
  it('withReadonlyRootfs', () => {
    assert.equal(applyOpts(baseSpec('/r'), [withReadonlyRootfs(true)]).root?.readonly, true);
  });
});

describe('podFileMounts', () => {
  const files = { hostsPath: '/p/hosts', resolvPath: '/p/resolv', hostnamePath: '/p/hostname', shmPath: '/p/shm' };
  it('binds the pod files, skipping targets the config mounts', () => {
    const m = podFileMounts(files, [mount({ container_path: '/etc/hosts/', host_path: '/k/hosts' })], false);
    assert.deepEqual(m.map((x) => [x.container_path, x.host_path, x.readonly]), [
      ['/etc/hostname', '/p/hostname', false],
      ['/etc/resolv.conf', '/p/resolv', false],
      ['/dev/shm', '/p/shm', false],
    ]);
  });
  it('makes the /etc files read-only with a read-only rootfs, but not /dev/shm', () => {
    const m = podFileMounts(files, [], true);
    assert.deepEqual(m.map((x) => x.readonly), [true, true, true, false]);
  });
  it('skips files not given', () => {
    assert.deepEqual(podFileMounts({}, [], false), []);
  });
});

describe('image volumes', () => {
  it('lists volumes no CRI mount covers', () => {
    assert.deepEqual(imageVolumesToCreate(['/data/', '/cache', '/data'], [mount({ container_path: '/cache', host_path: '/h' })]), ['/data']);
  });
  it('binds the prepared host dirs and reports a missing one', () => {
    assert.deepEqual(imageVolumeMounts(['/data'], [], { '/data': '/v/1' }), [
      { container_path: '/data', host_path: '/v/1', readonly: false, propagation: 'PROPAGATION_PRIVATE' },
    ]);
    assert.throws(() => imageVolumeMounts(['/data'], [], {}), Internal);
  });
});

describe('withBindMounts', () => {
  it('binds with rprivate and ro/rw, replacing default mounts on the same target', () => {
    const s = applyOpts(baseSpec('/r'), [
      withDefaultMounts(),
      withBindMounts([mount({ container_path: '/dev/shm', host_path: '/p/shm' }), mount({ container_path: '/cfg', host_path: '/h/cfg', readonly: true })], ctx),
    ]);
    assert.equal(s.mounts?.filter((m) => m.destination === '/dev/shm').length, 1);
    assert.deepEqual(s.mounts?.find((m) => m.destination === '/dev/shm'), { destination: '/dev/shm', type: 'bind', source: '/p/shm', options: ['rbind', 'rprivate', 'rw'] });
    assert.deepEqual(s.mounts?.find((m) => m.destination === '/cfg')?.options, ['rbind', 'rprivate', 'ro']);
    assert.equal(s.linux?.rootfsPropagation, undefined);
  });
  it('drops every default under /dev when /dev is mounted', () => {
    const s = applyOpts(baseSpec('/r'), [withDefaultMounts(), withBindMounts([mount({ container_path: '/dev', host_path: '/dev' })], ctx)]);
    assert.deepEqual(dest(s), ['/proc', '/sys', '/sys/fs/cgroup', '/dev']);
  });
  it('mounts parents before children, keeping config order otherwise', () => {
    const s = applyOpts(baseSpec('/r'), [withBindMounts([
      mount({ container_path: '/a/b/c', host_path: '/h/1' }),
      mount({ container_path: '/z', host_path: '/h/2' }),
      mount({ container_path: '/a', host_path: '/h/3' }),
      mount({ container_path: '/y', host_path: '/h/4' }),
    ], ctx)]);
    assert.deepEqual(dest(s), ['/z', '/a', '/y', '/a/b/c']);
  });
  it('Bidirectional on a shared mount → rshared and rshared rootfs', () => {
    const s = applyOpts(baseSpec('/r'), [withBindMounts([
      mount({ container_path: '/s', host_path: '/var/lib/s', propagation: 'PROPAGATION_HOST_TO_CONTAINER' }),
      mount({ container_path: '/b', host_path: '/var/lib/b', propagation: 'PROPAGATION_BIDIRECTIONAL' }),
      mount({ container_path: '/t', host_path: '/mnt/slave/t', propagation: 'PROPAGATION_HOST_TO_CONTAINER' }),
    ], ctx)]);
    assert.deepEqual(s.mounts?.map((m) => m.options?.[1]), ['rslave', 'rshared', 'rslave']);
    assert.equal(s.linux?.rootfsPropagation, 'rshared');
  });
  it('HostToContainer alone → rslave rootfs', () => {
    const s = applyOpts(baseSpec('/r'), [withBindMounts([mount({ container_path: '/s', host_path: '/mnt/slave/s', propagation: 'PROPAGATION_HOST_TO_CONTAINER' })], ctx)]);
    assert.equal(s.linux?.rootfsPropagation, 'rslave');
  });
  it('refuses propagation the host mount cannot give', () => {
    assert.throws(() => withBindMounts([mount({ container_path: '/b', host_path: '/mnt/slave/b', propagation: 'PROPAGATION_BIDIRECTIONAL' })], ctx)(baseSpec('/r')), InvalidArgument);
    assert.throws(() => withBindMounts([mount({ container_path: '/b', host_path: '/mnt/private/b', propagation: 'PROPAGATION_HOST_TO_CONTAINER' })], ctx)(baseSpec('/r')), InvalidArgument);
  });
  it('recursive read-only needs readonly, private propagation and support', () => {
    const rro = (over: Partial<Parameters<typeof mount>[0]>, c = ctx) => withBindMounts([mount({ container_path: '/r', host_path: '/h', recursive_read_only: true, readonly: true, ...over })], c)(baseSpec('/x'));
    const s = baseSpec('/x');
    withBindMounts([mount({ container_path: '/r', host_path: '/h', recursive_read_only: true, readonly: true })], ctx)(s);
    assert.deepEqual(s.mounts?.[0]?.options, ['rbind', 'rprivate', 'rro']);
    assert.throws(() => rro({ readonly: false }), /not read-only/);
    assert.throws(() => rro({ propagation: 'PROPAGATION_HOST_TO_CONTAINER' }), /private propagation/);
    assert.throws(() => rro({}, { ...ctx, recursiveReadOnly: false }), /does not support/);
  });
  it('refuses image volumes (the edge mounts them); leaves a mount\'s id mappings to the staging', () => {
    assert.throws(() => withBindMounts([mount({ container_path: '/i', host_path: '', image: { image: 'busybox', annotations: {}, user_specified_image: '', runtime_handler: '', image_ref: '' } })], ctx)(baseSpec('/r')), /image volumes/);
    // runc 1.1 has no id-mapped mount option: the spec keeps a plain bind, the staged source is the id-mapped copy.
    const mapping = [{ host_id: 65536, container_id: 0, length: 65536 }];
    const s = applyOpts(baseSpec('/r'), [withBindMounts([mount({ container_path: '/i', host_path: '/h', uidMappings: mapping, gidMappings: mapping })], ctx)]);
    assert.deepEqual(s.mounts, [{ destination: '/i', type: 'bind', source: '/h', options: ['rbind', 'rprivate', 'rw'] }]);
  });
  it('refuses relative paths and unknown propagation', () => {
    assert.throws(() => withBindMounts([mount({ container_path: 'data', host_path: '/h' })], ctx)(baseSpec('/r')), InvalidArgument);
    assert.throws(() => withBindMounts([mount({ container_path: '/data', host_path: 'h' })], ctx)(baseSpec('/r')), InvalidArgument);
    assert.throws(() => withBindMounts([{ container_path: '/d', host_path: '/h', readonly: false, propagation: 'X' }], ctx)(baseSpec('/r')), InvalidArgument);
  });
});

describe('cleanPath', () => {
  it('normalises and strips trailing slashes', () => {
    assert.equal(cleanPath('/a//b/../c/'), '/a/c');
    assert.equal(cleanPath('/'), '/');
  });
});
