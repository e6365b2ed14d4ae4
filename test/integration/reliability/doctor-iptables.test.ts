// `minicri doctor --repair` removes the iptables chains portmap made for a pod whose record was lost (the
// daemon killed, the row gone): listed as orphans first, then gone, and the nat table as it was.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { execa } from 'execa';
import { makeDaemonDirs, removeDirs, unmountUnder, runMinicri, TestDaemon, type DaemonDirs } from '../../support/daemon.js';
import { testNetwork } from '../../support/pod-daemon.js';
import { podConfig } from '../../support/pods.js';
import { freePort } from '../../support/registry.js';

interface Finding { kind: string; object: string; owner?: string; status: string }

const natRules = async () => (await execa('iptables', ['-w', '-t', 'nat', '-S'])).stdout.split('\n');

async function doctor(dirs: DaemonDirs, ...flags: string[]): Promise<{ code: number | null; findings: Finding[] }> {
  const out = await runMinicri(['doctor', '--json', '--config', dirs.configPath, ...flags]);
  return { code: out.code, findings: JSON.parse(out.stdout) as Finding[] };
}

describe('minicri doctor and portmap chains', () => {
  let dirs: DaemonDirs;
  let natBefore: string[];
  // Registered first, so it runs before the network is made.
  before(async () => { natBefore = await natRules(); });
  const network = testNetwork(84, 'the doctor iptables test', {
    network: (net) => net.writeBridgeConf({ extra: [{ type: 'portmap', capabilities: { portMappings: true } }] }),
    cleanup: async () => {
      await unmountUnder(dirs.base);
      removeDirs(dirs);
      // Other tests may change the nat table meanwhile: of the rules added since, none may point at this test's pods.
      const added = (await natRules()).filter((r) => !natBefore.includes(r));
      assert.deepEqual(added.filter((r) => r.includes(network.net.subnet.replace(/0\/24$/, ''))), []);
    },
  });

  it('lists the chains of a pod no record explains, and --repair removes them', async () => {
    const { net } = network;
    dirs = makeDaemonDirs('', net, { ownNetnsDir: true });
    const daemon = await TestDaemon.start(dirs);
    const hostPort = await freePort();
    const lost = (await daemon.client.runtime.call('RunPodSandbox', {
      config: podConfig('doc-portmap', (c) => { c.port_mappings = [{ protocol: 'TCP', container_port: 8080, host_port: hostPort, host_ip: '127.0.0.1' }]; }),
    })).pod_sandbox_id;
    const chains = (await natRules()).filter((r) => r.includes(lost)).map((r) => /-j (CNI-(?:DN|SN)-\S+)/.exec(r)?.[1]).filter((c): c is string => c !== undefined);
    assert.ok(chains.length > 0, 'portmap made a chain for the pod');

    assert.equal(await daemon.stop('SIGKILL'), -1);
    const db = new Database(`${dirs.rootDir}/minicri.db`);
    db.prepare("DELETE FROM records WHERE kind = 'sandbox' AND id = ?").run(lost);
    db.close();

    const sick = await doctor(dirs);
    assert.equal(sick.code, 1);
    const orphanChains = sick.findings.filter((f) => f.kind === 'iptables-chain' && f.status === 'orphan').map((f) => f.object).sort();
    assert.deepEqual(orphanChains, [...new Set(chains)].map((c) => `nat ${c}`).sort());

    const repaired = await doctor(dirs, '--repair');
    assert.equal(repaired.code, 0, JSON.stringify(repaired.findings.filter((f) => f.status !== 'ok')));
    assert.deepEqual(repaired.findings, [], 'nothing of the lost pod is left to find');
    const rules = await natRules();
    assert.deepEqual(rules.filter((r) => r.includes(lost) || chains.some((c) => r.includes(c))), [], 'no rule of the pod and none of its chains');
    assert.deepEqual(await net.allocatedIps(), []);
  });
});
