import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assignInterfaces, parseDefaultNetworkSelection, parseNetworkSelections } from '../../../cni/network-selection.js';
import { InvalidArgument } from '../../../core/errors.js';

test('the comma form: name, namespace/name, name@interface, spaces and empty elements ignored', () => {
  assert.deepEqual(parseNetworkSelections(' net-a, other-ns/net-b ,net-c@data0,, ', 'pods'), [
    { name: 'net-a', namespace: 'pods' },
    { name: 'net-b', namespace: 'other-ns' },
    { name: 'net-c', namespace: 'pods', interface: 'data0' },
  ]);
  assert.deepEqual(parseNetworkSelections('', 'pods'), []);
});

test('the JSON form with every selection field', () => {
  const value = JSON.stringify([
    { name: 'a' },
    {
      name: 'b', namespace: 'ns2', interface: 'fast0', ips: ['10.9.0.5/24'], mac: '02:AA:00:00:00:01', 'default-route': ['10.9.0.1'],
      portMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp' }], bandwidth: { ingressRate: 1000, egressRate: 2000 },
      'cni-args': { vlan: 12, mode: 'x', on: true }, 'infiniband-guid': 'ignored',
    },
  ]);
  assert.deepEqual(parseNetworkSelections(value, 'pods'), [
    { name: 'a', namespace: 'pods' },
    {
      name: 'b', namespace: 'ns2', interface: 'fast0', ips: ['10.9.0.5/24'], mac: '02:aa:00:00:00:01', defaultRoute: ['10.9.0.1'],
      portMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp' }], bandwidth: { ingressRate: 1000, egressRate: 2000 },
      cniArgs: { vlan: '12', mode: 'x', on: 'true' },
    },
  ]);
});

test('bad annotations are InvalidArgument naming the problem', () => {
  const cases: [string, RegExp][] = [
    ['[{"name": "a"', /k8s\.v1\.cni\.cncf\.io\/networks is not valid JSON/],
    ['{"name": "a"}', /must be a JSON list/],
    ['[{"namespace": "x"}]', /element 1 field "name" is required/],
    ['[{"name": "a", "ips": ["10.0.0.1"]}]', /element 1 field "ips\.0" must be an address with prefix length/],
    ['[{"name": "a", "mac": "zz"}]', /field "mac" must be a MAC address/],
    ['[{"name": "a", "cni-args": {"k": "a;b"}}]', /field "cni-args\.k" must not contain ";"/],
    ['[{"name": "a", "cni-args": {"k": {"x": 1}}}]', /field "cni-args\.k"/],
    ['Bad_NS/net', /namespace "Bad_NS" is not a valid namespace name \(a DNS-1123 label/],
    ['a/b/c', /"a\/b\/c" is not of the form \[namespace\/\]name\[@interface\]/],
    ['net@', /interface name "" is not a valid Linux interface name/],
    ['net@waytoolonginterface', /interface name "waytoolonginterface"/],
    ['NET', /network name "NET" is not a valid object name/],
  ];
  for (const [value, re] of cases) {
    assert.throws(() => parseNetworkSelections(value, 'pods'), (err: unknown) => err instanceof InvalidArgument && re.test(err.message), value);
  }
});

test('interfaces: net<position> unless named; a clash with another, eth0 or lo is refused', () => {
  const planned = assignInterfaces(parseNetworkSelections('a, b@custom, c', 'p'));
  assert.deepEqual(planned.map((p) => p.ifName), ['net1', 'custom', 'net3']);
  assert.throws(() => assignInterfaces(parseNetworkSelections('a, b@net1', 'p')), /network p\/b would use interface net1, which network p\/a already uses/);
  assert.throws(() => assignInterfaces(parseNetworkSelections('a@eth0', 'p')), /interface eth0, which the default network already uses/);
  assert.throws(() => assignInterfaces(parseNetworkSelections('a, a', 'p').map((s) => ({ ...s, interface: 'x' }))), /interface x/);
});

test('the default-network annotation names exactly one network', () => {
  assert.deepEqual(parseDefaultNetworkSelection('other/net', 'p'), { name: 'net', namespace: 'other' });
  assert.deepEqual(parseDefaultNetworkSelection('[{"name":"n"}]', 'p'), { name: 'n', namespace: 'p' });
  assert.throws(() => parseDefaultNetworkSelection('[{"name":"a"},{"name":"b"}]', 'p'), /exactly one network, not 2/);
  assert.throws(() => parseDefaultNetworkSelection('a@net1', 'p'), /always on eth0/);
});
