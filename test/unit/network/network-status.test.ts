import { test } from 'node:test';
import assert from 'node:assert/strict';
import { networkStatusEntry } from '../../../cni/network-status.js';
import { parseResult } from '../../../cni/result.js';

test('an entry as multus writes it: the pod-side interface, its IPs without prefix, mac, dns', () => {
  const result = parseResult({
    cniVersion: '1.0.0',
    interfaces: [{ name: 'mcnt-br1', mac: '0a:00:00:00:00:01' }, { name: 'veth1', mac: '0a:00:00:00:00:02' }, { name: 'net1', mac: '02:00:00:00:00:03', sandbox: '/var/run/netns/x' }],
    ips: [{ address: '10.9.0.5/24', interface: 2, gateway: '10.9.0.1' }, { address: 'fd00::5/64', interface: 2 }, { address: '10.8.0.1/24', interface: 0 }],
    dns: { nameservers: ['10.9.0.53'], search: ['svc'], domain: 'example' },
  }, 'test');
  assert.deepEqual(networkStatusEntry('ns/net-a', 'net1', result, { gateway: ['10.9.0.1'] }), {
    name: 'ns/net-a', interface: 'net1', ips: ['10.9.0.5', 'fd00::5'], mac: '02:00:00:00:00:03',
    dns: { nameservers: ['10.9.0.53'], search: ['svc'], domain: 'example' }, gateway: ['10.9.0.1'],
  });
});

test('the default network is marked, device-info is passed on, a result without interfaces keeps its IPs', () => {
  const result = parseResult({ cniVersion: '1.1.0', ips: [{ address: '10.1.0.2/16' }], 'device-info': { type: 'pci', version: '1.1.0', pci: { 'pci-address': '0000:03:02.1' } } }, 'test');
  assert.deepEqual(networkStatusEntry('minicri', 'eth0', result, { isDefault: true }), {
    name: 'minicri', interface: 'eth0', ips: ['10.1.0.2'], default: true, dns: {},
    'device-info': { type: 'pci', version: '1.1.0', pci: { 'pci-address': '0000:03:02.1' } },
  });
});
