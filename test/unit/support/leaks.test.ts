// The leak check's pure half: what counts as a difference between two host snapshots, how it is named,
// and how the raw listings become entries. Fed made-up snapshots; nothing here looks at the host.
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import {
  describeLeaks, diffSnapshots, networkFixtureObjects, parseIptablesSave, processKind, type HostSnapshot,
} from '../../support/leaks.js';

function snapshot(over: Partial<HostSnapshot> = {}): HostSnapshot {
  return {
    processes: [], links: ['device lo'], iptables: [], nft: [], mounts: ['/'], loops: [], netns: [], cgroups: [], runc: [],
    cni: [], ipam: [], tmp: [], sysctls: ['net.ipv4.ip_forward=0'], unchecked: {}, ...over,
  };
}

describe('diffSnapshots', () => {
  it('finds nothing between equal snapshots', () => {
    assert.deepEqual(diffSnapshots(snapshot(), snapshot()), {});
  });

  it('names each new object by kind, and leaves out what was there before', () => {
    const before = snapshot({ processes: ['conmon 10: conmon -c old'], tmp: ['/tmp/minicri-old'] });
    const after = snapshot({
      processes: ['conmon 10: conmon -c old', 'daemon 42: node /w/dist/server/main.js serve', 'tool 43: sleep 600'],
      links: ['device lo', 'dummy mcnt-d0'],
      iptables: ['iptables -t filter -A INPUT -s 192.0.2.7/32 -j DROP'],
      tmp: ['/tmp/minicri-old', '/tmp/minicri-new'],
      loops: ['/dev/loop3 /tmp/img'],
    });
    assert.deepEqual(diffSnapshots(before, after), {
      processes: ['daemon 42: node /w/dist/server/main.js serve', 'tool 43: sleep 600'],
      links: ['dummy mcnt-d0'],
      iptables: ['iptables -t filter -A INPUT -s 192.0.2.7/32 -j DROP'],
      tmp: ['/tmp/minicri-new'],
      loops: ['/dev/loop3 /tmp/img'],
    });
  });

  it('reports a link that is gone (a host device not given back) and a sysctl with its old value', () => {
    const before = snapshot({ links: ['device lo', 'dummy hostdev0'], sysctls: ['kernel.panic=0', 'net.ipv4.ip_forward=0'] });
    const after = snapshot({ links: ['device lo'], sysctls: ['kernel.panic=0', 'net.bridge.bridge-nf-call-iptables=1', 'net.ipv4.ip_forward=1'] });
    assert.deepEqual(diffSnapshots(before, after), {
      links: ['dummy hostdev0 is gone (it was there before)'],
      sysctls: ['net.bridge.bridge-nf-call-iptables=1 (was unset)', 'net.ipv4.ip_forward=1 (was 0)'],
    });
  });

  it('reports a kind a snapshot could not list, before or after, rather than passing on its empty list', () => {
    const failed = snapshot({ unchecked: { nft: 'could not check nft tables: Command failed with exit code 1: nft -j list tables' } });
    const missing = snapshot({ unchecked: { loops: 'not checked: losetup is not installed' } });
    const leaks = diffSnapshots(failed, missing);
    assert.deepEqual(leaks, {
      nft: ['could not check nft tables: Command failed with exit code 1: nft -j list tables'],
      loops: ['not checked: losetup is not installed'],
    });
    assert.match(describeLeaks(leaks), /^ {2}nft: could not check nft tables: .*\n {2}loops: not checked: losetup is not installed$/);
    assert.deepEqual(diffSnapshots(snapshot(), failed, {}, ['netns']), {}, 'only the kinds asked');
  });

  it('checks only the kinds asked', () => {
    const after = snapshot({ tmp: ['/tmp/mcnt-1-x'], netns: ['cni-1'] });
    assert.deepEqual(diffSnapshots(snapshot(), after, {}, ['netns']), { netns: ['cni-1'] });
  });

  it("lets a network fixture keep its bridge and the shared chains, but not a pod's rules in them", () => {
    const allowed = networkFixtureObjects('mcnt-br7');
    const shared = [
      'iptables -t nat -N CNI-HOSTPORT-MASQ',
      'iptables -t nat -A POSTROUTING -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ',
      'iptables -t nat -A CNI-HOSTPORT-MASQ -m mark --mark 0x2000/0x2000 -j MASQUERADE',
    ];
    const pods = [
      'iptables -t nat -N CNI-DN-0123456789abcdef',
      'iptables -t nat -A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"mcnt\\"" -m multiport --dports 8080 -j CNI-DN-0123456789abcdef',
      'iptables -t filter -A CNI-FORWARD -d 10.233.7.2/32 -j ACCEPT',
      'ip6tables -t filter -A CNI-FORWARD -s fd00:7::2/128 -j ACCEPT',
    ];
    const after = snapshot({ links: ['device lo', 'bridge mcnt-br7', 'veth veth1234'], iptables: [...shared, ...pods] });
    assert.deepEqual(diffSnapshots(snapshot(), after, allowed), { links: ['veth veth1234'], iptables: pods });
    // Its bridge gone before the check is its own doing, not a link that failed to come back.
    assert.deepEqual(diffSnapshots(snapshot({ links: ['device lo', 'bridge mcnt-br7'] }), snapshot(), allowed), {});
  });
});

describe('describeLeaks', () => {
  it('gives one line per object, its kind first, in a fixed order of kinds', () => {
    assert.equal(describeLeaks({ tmp: ['/tmp/minicri-x'], processes: ['tool 7: sleep 600'] }),
      '  processes: tool 7: sleep 600\n  tmp: /tmp/minicri-x');
    assert.equal(describeLeaks({}), '');
  });
});

describe('parseIptablesSave', () => {
  it('lists user chains and rules of every table as commands, without counters or built-in chains', () => {
    const dump = [
      '# Generated by iptables-save v1.8.9', '*nat', ':PREROUTING ACCEPT [0:0]', ':CNI-abc - [0:0]',
      '-A POSTROUTING -s 10.1.0.2/32 -j CNI-abc', 'COMMIT', '*filter', ':INPUT ACCEPT [10:20]', '[3:4] -A INPUT -j DROP', 'COMMIT',
    ].join('\n');
    assert.deepEqual(parseIptablesSave('ip6tables', dump), [
      'ip6tables -t nat -N CNI-abc',
      'ip6tables -t nat -A POSTROUTING -s 10.1.0.2/32 -j CNI-abc',
      'ip6tables -t filter -A INPUT -j DROP',
    ]);
  });
});

describe('processKind', () => {
  it('knows the processes tests start', () => {
    assert.equal(processKind(['/usr/bin/conmon', '-c', 'x'], false), 'conmon');
    assert.equal(processKind(['docker-registry', 'serve', 'c.yml'], false), 'registry');
    assert.equal(processKind(['/usr/bin/qemu-system-x86_64', '-m', '2G'], false), 'qemu');
    assert.equal(processKind(['/usr/lib/cni/dhcp', 'daemon'], false), 'cni plugin');
    assert.equal(processKind(['/usr/bin/node', '/w/dist/server/main.js', 'serve'], false), 'daemon');
    assert.equal(processKind(['node', '--input-type=module', '-e', 'x'], false), 'test helper');
    assert.equal(processKind(['/bin/sh', '-c', 'sleep 1'], true), 'container process');
  });

  it('leaves other processes alone, node test runs included', () => {
    assert.equal(processKind(['/usr/sbin/sshd', '-D'], false), undefined);
    assert.equal(processKind(['/usr/bin/node', '--test', '/w/dist/test/unit/a.test.js', '/w/dist/test/unit/bench/b.test.js'], false), undefined);
    assert.equal(processKind(['/usr/bin/node', '/w/dist/bench/grpc-floor-server.js'], false), 'test helper');
  });
});
