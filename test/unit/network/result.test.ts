import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cidrFamily, convertResult, parseResult, podIps } from '../../../cni/result.js';
import { InvalidArgument } from '../../../core/errors.js';

const ifaces = [{ name: 'cni0', mac: 'aa:bb:cc:dd:ee:01' }, { name: 'veth1', mac: 'aa:bb:cc:dd:ee:02' }, { name: 'eth0', mac: 'aa:bb:cc:dd:ee:03', sandbox: '/var/run/netns/x' }];

function legacy(version: string) {
  return {
    cniVersion: version,
    interfaces: ifaces,
    ips: [
      { version: '6', interface: 2, address: 'fd00::5/64', gateway: 'fd00::1' },
      { version: '4', interface: 2, address: '10.233.1.5/24', gateway: '10.233.1.1' },
      { version: '4', interface: 0, address: '10.233.1.1/24' },
    ],
    routes: [{ dst: '0.0.0.0/0' }],
    dns: { nameservers: ['10.0.0.10'] },
  };
}

function modern(version: string) {
  const r = legacy(version);
  return { ...r, ips: r.ips.map(({ version: _v, ...rest }) => rest) };
}

for (const version of ['0.3.0', '0.3.1', '0.4.0']) {
  test(`parse ${version} result (ips tagged with version)`, () => {
    const r = parseResult(legacy(version), 'test');
    assert.equal(r.cniVersion, version);
    assert.deepEqual(r.ips.map((i) => i.family), [6, 4, 4]);
    assert.equal(r.interfaces[2]!.sandbox, '/var/run/netns/x');
    assert.deepEqual(podIps(r), ['10.233.1.5', 'fd00::5']);
    const bad = legacy(version);
    bad.ips[0]!.version = '4';
    assert.throws(() => parseResult(bad, 'test'), /says version "4"/);
    // Plugins built on the 1.x Go library leave the tag out of older-version results.
    const untagged = parseResult(modern(version), 'test');
    assert.deepEqual(untagged.ips.map((i) => i.family), [6, 4, 4]);
  });
}

for (const version of ['1.0.0', '1.1.0']) {
  test(`parse ${version} result (ips without version)`, () => {
    const input = modern(version);
    if (version === '1.1.0') (input.routes[0] as Record<string, unknown>).mtu = 1400;
    const r = parseResult(input, 'test');
    assert.equal(r.cniVersion, version);
    assert.deepEqual(podIps(r), ['10.233.1.5', 'fd00::5']);
    assert.equal(r.raw, input);
  });
}

test('IPs not tied to an interface count as pod IPs', () => {
  const r = parseResult({ cniVersion: '1.0.0', ips: [{ address: '10.1.0.2/16' }, { address: '10.1.0.2/16' }] }, 't');
  assert.deepEqual(podIps(r), ['10.1.0.2']);
  assert.deepEqual(podIps(parseResult({ cniVersion: '1.0.0' }, 't')), []);
});

test('malformed results are rejected', () => {
  const bad: [unknown, RegExp][] = [
    [[], /not a JSON object/],
    [{ cniVersion: '0.2.0', ip4: {} }, /unsupported cniVersion/],
    [{ cniVersion: '1.0.0', ips: {} }, /"ips" is not an array/],
    [{ cniVersion: '1.0.0', ips: [{ address: '10.0.0.1' }] }, /not in CIDR/],
    [{ cniVersion: '1.0.0', ips: [{ address: '10.0.0.1/24', interface: 0 }] }, /refers to interface 0/],
    [{ cniVersion: '1.0.0', interfaces: [{}] }, /interface #0 has no name/],
  ];
  for (const [json, re] of bad) assert.throws(() => parseResult(json, 'p'), (e: unknown) => e instanceof InvalidArgument && re.test((e as Error).message));
});

test('convertResult adds or drops the per-IP version tag', () => {
  const from1 = parseResult(modern('1.0.0'), 't');
  const as04 = convertResult(from1, '0.4.0') as { cniVersion: string; ips: { version: string }[]; dns: unknown };
  assert.equal(as04.cniVersion, '0.4.0');
  assert.deepEqual(as04.ips.map((i) => i.version), ['6', '4', '4']);
  assert.deepEqual(as04.dns, { nameservers: ['10.0.0.10'] });
  const back = convertResult(parseResult(as04, 't'), '1.1.0') as { cniVersion: string; ips: Record<string, unknown>[] };
  assert.equal(back.cniVersion, '1.1.0');
  assert.ok(back.ips.every((i) => !('version' in i)));
  assert.deepEqual(back.ips, modern('1.0.0').ips);
});

test('cidrFamily', () => {
  assert.equal(cidrFamily('10.0.0.1/8'), 4);
  assert.equal(cidrFamily('::1/128'), 6);
  assert.equal(cidrFamily('10.0.0.256/8'), undefined);
  assert.equal(cidrFamily('10.0.0.1/33'), undefined);
  assert.equal(cidrFamily('10.0.0.1'), undefined);
  assert.equal(cidrFamily('x/1'), undefined);
});
