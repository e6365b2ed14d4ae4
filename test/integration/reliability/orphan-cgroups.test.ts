// Pod cgroups never outlive their records: removal after a reboot (runc's state gone, so `runc delete`
// has nothing to delete) still removes the cgroups, and recovery and `minicri doctor` find and remove
// empty container cgroups no record explains, in every hierarchy.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { execa } from 'execa';
import { cgroupHierarchies, removeCgroupDir } from '../../../oci/runtime/cgroups.js';
import { makeDaemonDirs, removeDirs, runMinicri, TestDaemon, type DaemonDirs } from '../../support/daemon.js';
import { testNetwork } from '../../support/pod-daemon.js';
import { podConfig } from '../../support/pods.js';

/** The test pods' cgroup parent (support/pods.ts). */
const PARENT = '/minicri-test';

/** The hierarchies where a cgroup of `id` under the test parent exists. */
async function cgroupsOf(id: string): Promise<string[]> {
  return (await cgroupHierarchies()).filter((root) => existsSync(join(root, PARENT, id)));
}

describe('pod cgroups', () => {
  let dirs: DaemonDirs | undefined;
  const planted: string[] = [];
  const network = testNetwork(91, 'the cgroup tests', {
    cleanup: async () => {
      for (const id of planted) await removeCgroupDir(join(PARENT, id)).catch(() => undefined);
      if (dirs) removeDirs(dirs);
    },
  });

  it('are removed with their pod after a reboot emptied runc\'s state', async () => {
    dirs = makeDaemonDirs('', network.net);
    let daemon = await TestDaemon.start(dirs);
    try {
      const id = (await daemon.client.runtime.call('RunPodSandbox', { config: podConfig('cg-reboot') })).pod_sandbox_id;
      const info = JSON.parse((await daemon.client.runtime.call('PodSandboxStatus', { pod_sandbox_id: id, verbose: true })).info.info);
      assert.ok((await cgroupsOf(id)).length > 0, 'the pause has cgroups');
      assert.equal(await daemon.stop(), 0);
      // The reboot: the pause and its conmon die, /run goes (netns pin, runc and conmon state).
      await execa('kill', ['-9', String(info.pid)]);
      await execa('sh', ['-c', `for p in $(pgrep -x conmon); do grep -qs '${dirs.base}' /proc/$p/cmdline && kill -9 $p; done; true`]);
      await execa('umount', [info.netnsPath], { reject: false });
      await execa('rm', ['-f', info.netnsPath, info.netnsLink]);
      await execa('sh', ['-c', `grep -o ' ${dirs.stateDir}/[^ ]*' /proc/self/mounts | xargs -r -n1 umount -l; rm -rf ${dirs.stateDir}/*`]);

      daemon = await TestDaemon.start(dirs);
      await daemon.client.runtime.call('StopPodSandbox', { pod_sandbox_id: id });
      await daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: id });
      assert.deepEqual(await cgroupsOf(id), [], 'no hierarchy keeps the pod\'s cgroup');
      assert.deepEqual(await network.net.allocatedIps(), []);
    } finally {
      await daemon.stop();
    }
  });

  it('no record explains are found by doctor, and removed by doctor --repair and by recovery at start', async () => {
    dirs ??= makeDaemonDirs('', network.net);
    // The daemon has run a pod under the test parent, so it looks there.
    let daemon = await TestDaemon.start(dirs);
    const kept = (await daemon.client.runtime.call('RunPodSandbox', { config: podConfig('cg-kept') })).pod_sandbox_id;
    assert.equal(await daemon.stop('SIGKILL'), -1);

    const plant = async () => {
      const id = randomBytes(32).toString('hex');
      planted.push(id);
      for (const root of await cgroupHierarchies()) await mkdir(join(root, PARENT, id), { recursive: true });
      return id;
    };
    const byDoctor = await plant();
    const out = await runMinicri(['doctor', '--json', '--config', dirs.configPath]);
    const findings = JSON.parse(out.stdout) as { kind: string; owner?: string; status: string }[];
    assert.equal(out.code, 1);
    assert.deepEqual(findings.filter((f) => f.kind === 'cgroup' && f.owner === byDoctor).map((f) => f.status), ['orphan']);
    assert.deepEqual(findings.filter((f) => f.kind === 'cgroup' && f.owner === kept).map((f) => f.status), ['ok'], 'the live pod\'s cgroup is explained');
    const repaired = await runMinicri(['doctor', '--repair', '--config', dirs.configPath]);
    assert.equal(repaired.code, 0, repaired.stdout + repaired.stderr);
    assert.deepEqual(await cgroupsOf(byDoctor), [], 'doctor --repair removed the orphan in every hierarchy');

    const byRecovery = await plant();
    daemon = await TestDaemon.start(dirs);
    try {
      assert.deepEqual(await cgroupsOf(byRecovery), [], 'recovery removed the orphan in every hierarchy');
      assert.match(daemon.log(), new RegExp(`"kind":"cgroup","object":"${PARENT}/${byRecovery}".*removing a host object no record explains`));
      assert.ok((await cgroupsOf(kept)).length > 0, 'the live pod keeps its cgroups');
      await daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: kept });
      assert.deepEqual(await cgroupsOf(kept), []);
    } finally {
      await daemon.stop();
    }
  });
});
