// `minicri doctor` sees every host object of a pod, calls those no record explains orphans, and
// --repair removes exactly those, leaving the pods the store knows untouched.
import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { makeDaemonDirs, removeDirs, unmountUnder, runMinicri, TestDaemon, type DaemonDirs } from '../../support/daemon.js';
import { testNetwork } from '../../support/pod-daemon.js';
import { podConfig } from '../../support/pods.js';

interface Finding { kind: string; object: string; owner?: string; status: string }

async function doctor(dirs: DaemonDirs, ...flags: string[]): Promise<{ code: number | null; findings: Finding[] }> {
  const out = await runMinicri(['doctor', '--json', '--config', dirs.configPath, ...flags]);
  return { code: out.code, findings: JSON.parse(out.stdout) as Finding[] };
}

const kindsOf = (findings: Finding[], owner: string, status: string) =>
  [...new Set(findings.filter((f) => f.owner && owner.startsWith(f.owner) && f.status === status).map((f) => f.kind))].sort();

describe('minicri doctor', () => {
  let dirs: DaemonDirs;
  const network = testNetwork(69, 'the doctor test', {
    cleanup: async () => {
      await unmountUnder(dirs.netnsDir!);
      removeDirs(dirs);
    },
  });

  it('finds the orphans of a pod whose record was lost, and repairs only those', async () => {
    const { net } = network;
    dirs = makeDaemonDirs('', net, { ownNetnsDir: true });
    let daemon = await TestDaemon.start(dirs);
    const kept = (await daemon.client.runtime.call('RunPodSandbox', { config: podConfig('doc-kept') })).pod_sandbox_id;
    const lost = (await daemon.client.runtime.call('RunPodSandbox', { config: podConfig('doc-lost') })).pod_sandbox_id;

    const healthy = await doctor(dirs);
    assert.equal(healthy.code, 0, JSON.stringify(healthy.findings));
    const expected = ['cni-attachment', 'conmon', 'ip-reservation', 'netns', 'rootfs', 'runc', 'shm'];
    // A pod's cgroup is listed while its record explains it; unexplained, it is runc's delete that removes it
    // (an empty one only is an orphan of its own: a cgroup with processes may be another runtime's).
    const explained = [...expected, 'cgroup'].sort();
    assert.deepEqual(kindsOf(healthy.findings, lost, 'ok'), explained);

    // The record is lost (written away behind the daemon's back, then the daemon dies): everything
    // the pod holds is now unexplained.
    const db = new Database(`${dirs.rootDir}/minicri.db`);
    db.prepare("DELETE FROM records WHERE kind = 'sandbox' AND id = ?").run(lost);
    db.close();
    const whileRunning = await runMinicri(['doctor', '--repair', '--config', dirs.configPath]);
    assert.equal(whileRunning.code, 2);
    assert.match(whileRunning.stderr, /minicri is running on .*: stop it before --repair/);
    assert.equal(await daemon.stop('SIGKILL'), -1);
    const sick = await doctor(dirs);
    assert.equal(sick.code, 1);
    assert.deepEqual(kindsOf(sick.findings, lost, 'orphan'), expected);
    assert.deepEqual(kindsOf(sick.findings, kept, 'orphan'), []);

    const repaired = await doctor(dirs, '--repair');
    assert.equal(repaired.code, 0, JSON.stringify(repaired.findings.filter((f) => f.status !== 'ok')));
    assert.deepEqual(kindsOf(repaired.findings, lost, 'ok'), []);
    assert.deepEqual(kindsOf(repaired.findings, kept, 'ok'), explained);
    assert.equal((await net.allocatedIps()).length, 1, 'the lost pod released its IP, the kept one holds its own');
    assert.equal((await readdir(dirs.netnsDir!)).filter((n) => n.startsWith('minicri-')).length, 1);

    daemon = await TestDaemon.start(dirs);
    await daemon.client.runtime.call('RemovePodSandbox', { pod_sandbox_id: kept });
    await daemon.stop();
    assert.deepEqual(await net.allocatedIps(), []);
  });
});
