import assert from 'node:assert/strict';
import { it } from 'node:test';
import { parsePortmapChains } from '../../../cni/inventory.js';

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
