import assert from 'node:assert/strict';
import { it } from 'node:test';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { hostLocalReservations, parsePortmapChains } from '../../../cni/inventory.js';
import { silentLogger } from '../../../core/log.js';

// As `iptables -t nat -S` prints them after portmap set up one pod.
const RULES = String.raw`-N CNI-DN-4d3f01eb716197e730075
-N CNI-HOSTPORT-DNAT
-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
-A CNI-DN-4d3f01eb716197e730075 -p tcp -m tcp --dport 18080 -j DNAT --to-destination 10.233.68.2:80
-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"mcnt-net68\" id: \"9fe06ccafb58e2bd771c40c57c6b420818fea22fb99c111a957edc8eae391f41\"" -m multiport --dports 18080 -j CNI-DN-4d3f01eb716197e730075
-A CNI-HOSTPORT-SETMARK -m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark 0x2000/0x2000`;

it('finds the per-pod portmap chains and the sandbox each belongs to', () => {
  assert.deepEqual(parsePortmapChains(RULES), [
    { chain: 'CNI-DN-4d3f01eb716197e730075', containerId: '9fe06ccafb58e2bd771c40c57c6b420818fea22fb99c111a957edc8eae391f41' },
  ]);
  assert.deepEqual(parsePortmapChains('-P PREROUTING ACCEPT\n'), []);
});

it('lists host-local reservations of the conf dir networks and of the defined secondary ones, each dir once', async (t) => {
  const root = await mkdtemp(path.join(tmpdir(), 'mcnt-inv-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const [conf, nets, data] = ['net.d', 'networks.d', 'ipam'].map((d) => path.join(root, d));
  const bridge = (name: string) => JSON.stringify({ cniVersion: '1.0.0', name, type: 'bridge', ipam: { type: 'host-local', dataDir: data, subnet: '10.9.0.0/24' } });
  await mkdir(conf);
  await mkdir(nets);
  await writeFile(path.join(conf, '10-main.conf'), bridge('main'));
  const nad = (name: string, net: string) => ({ apiVersion: 'k8s.cni.cncf.io/v1', kind: 'NetworkAttachmentDefinition', metadata: { name }, spec: { config: bridge(net) } });
  await writeFile(path.join(nets, 'nets.json'), JSON.stringify({ kind: 'List', items: [nad('a', 'sec'), nad('b', 'sec'), nad('c', 'main')] }));
  for (const [net, ip, owner] of [['main', '10.9.0.2', 'p1'], ['sec', '10.9.0.3', 'p2']]) {
    await mkdir(path.join(data, net!), { recursive: true });
    await writeFile(path.join(data, net!, ip!), `${owner}\r\neth0`);
  }
  const found = await hostLocalReservations(conf, nets, silentLogger);
  assert.deepEqual(found.map((r) => [r.network, r.ip, r.containerId]), [['main', '10.9.0.2', 'p1'], ['sec', '10.9.0.3', 'p2']]);
});
