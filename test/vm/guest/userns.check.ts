// User namespaces on Debian 12's kernel 6.1 (check c): a pod with its own user namespace, as kubelet allocates it
// (host ids from 65536*k, 65536 of them), whose container's mount carries the pod's id mappings as kubelet 1.33+
// sends them: an ext4 hostPath runs, its files showing their owners inside; a tmpfs source cannot be id-mapped
// before Linux 6.3, and minicri says so.
import assert from 'node:assert/strict';
import { chown, mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type * as grpc from '@grpc/grpc-js';
import type { ContainerConfig } from '../../../gen/runtime/v1/ContainerConfig.js';
import type { PodSandboxConfig } from '../../../gen/runtime/v1/PodSandboxConfig.js';
import { GuestEnv, sh, type Pod } from './env.js';

const HOST_BASE = 65536 * 3;
const RANGE = 65536;
const MAPPING = [{ host_id: HOST_BASE, container_id: 0, length: RANGE }];

const userns = (c: PodSandboxConfig) => {
  c.linux!.security_context!.namespace_options = { network: 'POD', pid: 'POD', ipc: 'POD', userns_options: { mode: 'POD', uids: MAPPING, gids: MAPPING } };
};
/** A hostPath mount with the pod's mappings, as kubelet sends it for a user-namespaced pod. */
const mapped = (hostPath: string) => (c: ContainerConfig) => {
  c.mounts = [{ container_path: '/data', host_path: hostPath, readonly: false, propagation: 'PROPAGATION_PRIVATE', uidMappings: MAPPING, gidMappings: MAPPING }];
};

describe('user namespaces in the VM: id-mapped mounts on kernel 6.1', { timeout: 15 * 60_000 }, () => {
  let env: GuestEnv;
  let pod: Pod;
  let dir: string;
  before(async () => {
    dir = await mkdtemp('/var/tmp/minicri-vm-userns-');
    env = await GuestEnv.start('userns');
    pod = await env.runPod('userns', userns);
  });
  after(async () => {
    await env?.stop();
    if (dir) {
      await sh(`umount ${join(dir, 'tmpfs')}`);
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('runs a container whose ext4 hostPath mount carries the pod\'s id mappings, its files owned by the right ids inside', async () => {
    const volume = join(dir, 'ext4');
    await mkdir(volume);
    assert.equal((await sh(`stat -f -c %T ${volume}`)).stdout.trim(), 'ext2/ext3', 'the volume is on ext4');
    // As kubelet leaves a volume: files of the node's root, and one of a user of the image (1000).
    await writeFile(join(volume, 'root-file'), 'root\n');
    await writeFile(join(volume, 'app-file'), 'app\n');
    await chown(join(volume, 'app-file'), 1000, 1000);
    const id = await env.run(pod, 'mapped', ['sleep', '3600'], mapped(volume));
    const inside = await env.exec(id, 'id -u; cat /proc/self/uid_map | tr -s " " | sed "s/^ //"; stat -c "%u:%g %n" /data /data/root-file /data/app-file; echo new > /data/made-inside');
    assert.equal(inside.exitCode, 0, inside.stderr);
    assert.deepEqual(inside.stdout.trim().split('\n'), [
      '0', `0 ${HOST_BASE} ${RANGE}`, '0:0 /data', '0:0 /data/root-file', '1000:1000 /data/app-file',
    ]);
    // Written by the pod's root through the mapping: the node's root owns it, as it owns the volume.
    const made = await stat(join(volume, 'made-inside'));
    assert.deepEqual([made.uid, made.gid], [0, 0]);
  });

  it('refuses a tmpfs source with an error naming the Linux 6.3 requirement', async () => {
    const volume = join(dir, 'tmpfs');
    await mkdir(volume);
    const mount = await sh(`mount -t tmpfs -o size=1m tmpfs ${volume}`);
    assert.equal(mount.exitCode, 0, mount.stderr);
    await assert.rejects(
      async () => { await env.run(pod, 'tmpfs', ['sleep', '3600'], mapped(volume)); },
      (err: grpc.ServiceError) => {
        assert.match(err.details ?? err.message, /6\.3/, `the error names the kernel requirement: ${err.details ?? err.message}`);
        assert.match(err.details ?? err.message, /tmpfs/i);
        return true;
      },
    );
  });
});
